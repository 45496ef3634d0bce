"""Domain errors shared by the core. Front ends (CLI, LSP, gateway) turn them into messages."""

from __future__ import annotations


class MnemoError(Exception):
    """Base class: the message is meant for the user."""


class IndexUnavailable(MnemoError):
    """The index cannot be opened or built (missing extension, unwritable folder)."""


class IndexBusy(MnemoError):
    """Another process holds the index for writing."""


class SearchCancelled(MnemoError):
    """The caller cancelled a long operation."""

"""Verdicts, decisions, and the context a built-in rule checks one exec segment in.

Kept apart from :mod:`mnemo.policy.rules` so that the rule modules (destructive, binaries, targets, inline)
import it without importing the checker that calls them: nested command lines are checked through
:attr:`Context.recurse`, never through an import of :mod:`mnemo.policy.rules`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path


class Verdict(IntEnum):
    """Ordered by strictness: ``max()`` of verdicts is the strictest."""

    ALLOW = 0
    CONFIRM = 1
    DENY = 2

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Verdict:
        try:
            return cls[str(text).strip().upper()]
        except KeyError:
            raise ValueError(f"decision must be allow, confirm or deny, not {text!r}") from None


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    rule: str
    """Which rule decided: ``builtin:<name>``, ``shell:<name>``, ``config:rules[<i>]``, ``allow_binaries``,
    ``default:<tool>``, ``risk:level-<n>``."""
    reason: str


def strictest(decisions: list[Decision]) -> Decision | None:
    """The strictest decision; the first one wins a tie."""
    best: Decision | None = None
    for decision in decisions:
        if best is None or decision.verdict > best.verdict:
            best = decision
    return best


def deny(name: str, reason: str) -> Decision:
    return Decision(Verdict.DENY, f"builtin:{name}", reason)


def confirm(name: str, reason: str) -> Decision:
    return Decision(Verdict.CONFIRM, f"builtin:{name}", reason)


@dataclass(frozen=True)
class Context:
    """Where one segment is checked."""

    ws: Path
    """The workspace (resolved)."""
    base: Path
    """The folder relative paths resolve against (the workspace, or where an earlier ``cd`` went)."""
    depth: int
    recurse: Callable[[str], Decision]
    """Checks a nested command line (``sh -c``, ``find -exec``, ``git submodule foreach``) one level
    deeper, with the configured rules."""

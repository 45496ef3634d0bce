"""The ``mnemo`` command line: one module per command group, wired statically in :mod:`mnemo.cli.main`.

``main`` is loaded on first use, so importing one command group does not load the others.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "main":
        from mnemo.cli.main import main

        return main
    raise AttributeError(name)

"""The answer to ``initialize`` that mnemo's features give an editor, shipped with the package.

A start with no recorded answer for its client (:mod:`mnemo.lsp.quick_start`: the first start after an
install, an upgrade or a ``git pull``, when every record's key has changed) sends this one before pygls
loads, instead of waiting ~1 s for pygls and lsprotocol to import (``make run``'s first ``initialize``:
1,056 ms). pygls's own answer is then recorded for the next start, as for an out-of-date record.

It is what pygls answers for VS Code's and Neovim's capabilities: mnemo always negotiates UTF-16
positions (:class:`mnemo.lsp.server.MnemoProtocol`), so a client's capabilities change the answer only in
the two ``willSave`` flags, which a client that leaves them out gets as absent rather than ``false``
(the same meaning). ``tests/lsp/test_quick_initialize.py`` checks it against pygls's answer for several
clients' capabilities: a feature added or removed must be added or removed here.
"""

from __future__ import annotations

from typing import Any

from mnemo import __version__

CODE_ACTION_KINDS = [
    "quickfix",
    "refactor.move.mnemo.promote",
    "refactor.rewrite.mnemo.consolidate",
    "source",
]
COMMANDS = ["mnemo.reindex", "mnemo.consolidate", "mnemo.commit", "mnemo.history", "mnemo.flush"]


def shipped_answer() -> dict[str, Any]:
    """The ``initialize`` result for an editor's capabilities (a new dict each call)."""
    sync = {"openClose": True, "change": 1, "willSave": False, "willSaveWaitUntil": False, "save": True}
    return {
        "capabilities": {
            "positionEncoding": "utf-16",
            "textDocumentSync": sync,
            "hoverProvider": True,
            "codeActionProvider": {"codeActionKinds": list(CODE_ACTION_KINDS)},
            "codeLensProvider": {"resolveProvider": False},
            "executeCommandProvider": {"commands": list(COMMANDS)},
            "workspace": {
                "workspaceFolders": {"supported": True, "changeNotifications": True},
                "fileOperations": {},
            },
        },
        "serverInfo": {"name": "mnemo", "version": __version__},
    }

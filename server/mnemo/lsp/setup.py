"""The one place where LSP features are registered."""

from __future__ import annotations

from mnemo.lsp.handlers import (
    actions,
    approvals,
    chat,
    diagnostics,
    documents,
    insight,
    lifecycle,
    search,
    security,
    vcs,
)
from mnemo.lsp.server import MnemoLanguageServer


def register_features(server: MnemoLanguageServer) -> None:
    lifecycle.register(server)
    documents.register(server)
    search.register(server)
    approvals.register(server)
    insight.register(server)
    diagnostics.register(server)
    actions.register(server)
    vcs.register(server)
    security.register(server)
    chat.register(server)  # last: another module may own textDocument/codeAction

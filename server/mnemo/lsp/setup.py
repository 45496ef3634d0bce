"""The one place where LSP features are registered."""

from __future__ import annotations

from mnemo.lsp.handlers import chat, documents, lifecycle, search
from mnemo.lsp.server import MnemoLanguageServer


def register_features(server: MnemoLanguageServer) -> None:
    lifecycle.register(server)
    documents.register(server)
    search.register(server)
    chat.register(server)  # last: another module may own textDocument/codeAction

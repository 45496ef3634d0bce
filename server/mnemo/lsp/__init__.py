"""The LSP front: the only package that imports pygls and lsprotocol. Handlers are thin adapters."""

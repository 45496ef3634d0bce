"""One module per area; each has ``register(server)``, called from :mod:`mnemo.lsp.setup`."""

"""The channel gateway: the same agent and memory from chat channels, authenticated (``mnemo gateway``)."""

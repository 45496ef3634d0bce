"""Channel plugins: built-in web chat and webhook; optional Telegram, Slack and Discord adapters."""

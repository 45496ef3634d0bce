"""Build the configured chat provider (nothing is loaded or connected here)."""

from __future__ import annotations

from pathlib import Path

from mnemo.config import AgentSettings

from .base import ChatProvider


def build_provider(settings: AgentSettings, cache_dir: Path) -> ChatProvider:
    """``cache_dir`` holds unpacked wheels and remembered model digests."""
    if settings.provider == "openai":
        from .openai_compat import OpenAIChatProvider

        return OpenAIChatProvider(
            settings.endpoint,
            settings.model,
            api_key_env=settings.api_key_env,
            context_window=settings.context_window,
            timeout_s=settings.timeout_s,
        )
    if settings.provider == "anthropic":
        from .anthropic import AnthropicChatProvider

        return AnthropicChatProvider(
            settings.endpoint,
            settings.model,
            api_key_env=settings.api_key_env,
            context_window=settings.context_window,
            timeout_s=settings.timeout_s,
        )
    from .local import LocalChatProvider

    return LocalChatProvider(
        settings.model_path,
        cache_dir,
        context_window=settings.context_window,
        threads=settings.threads,
        extra_buffer_types=settings.extra_buffer_types,
    )

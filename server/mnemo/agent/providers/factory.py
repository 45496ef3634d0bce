"""Build the configured chat provider (nothing is loaded here; ``auto`` may probe loopback, see
:mod:`mnemo.agent.providers.auto`)."""

from __future__ import annotations

from pathlib import Path

from mnemo.config import AgentSettings

from .auto import ChatSelection, select
from .base import ChatProvider

BUNDLED_WINDOW = 2048
"""Context given to the bundled 135M model unless ``[agent] context_window`` says otherwise: it cannot use
more, and a short prompt keeps the first token near a second on two cores."""


def build_provider(settings: AgentSettings, cache_dir: Path) -> ChatProvider:
    """``cache_dir`` holds unpacked wheels, remembered model digests and the auto provider's last probe."""
    return build_selected(settings, cache_dir, select(settings, cache_dir))


def describe(settings: AgentSettings, cache_dir: Path | None) -> ChatSelection:
    """Which chat model answers with these settings (probes loopback for ``auto``; loads nothing)."""
    return select(settings, cache_dir)


def build_selected(settings: AgentSettings, cache_dir: Path, selection: ChatSelection) -> ChatProvider:
    provider: ChatProvider
    if selection.provider == "openai":
        from .openai_compat import OpenAIChatProvider

        provider = OpenAIChatProvider(
            selection.endpoint,
            selection.model,
            api_key_env=settings.api_key_env,
            context_window=settings.context_window,
            timeout_s=settings.timeout_s,
            repeat_penalty=settings.repeat_penalty,
            frequency_penalty=settings.frequency_penalty,
            presence_penalty=settings.presence_penalty,
            selection=selection,
        )
    elif selection.provider == "anthropic":
        from .anthropic import AnthropicChatProvider

        provider = AnthropicChatProvider(
            settings.endpoint,
            settings.model,
            api_key_env=settings.api_key_env,
            context_window=settings.context_window,
            timeout_s=settings.timeout_s,
            selection=selection,
        )
    else:
        from .local import LocalChatProvider, Sampling

        window = settings.context_window
        if not window and selection.kind == "bundled":
            window = BUNDLED_WINDOW
        provider = LocalChatProvider(
            selection.model_path,
            cache_dir,
            context_window=window,
            threads=settings.threads,
            extra_buffer_types=settings.extra_buffer_types,
            sampling=Sampling(settings.repeat_penalty, settings.frequency_penalty, settings.presence_penalty),
            selection=selection,
        )
    return provider


def selection_of(provider: ChatProvider) -> ChatSelection | None:
    """The selection a provider was built for (None for providers built elsewhere, e.g. in tests)."""
    return provider.selection

"""The Anthropic messages API over HTTP with SSE streaming. Tokens are counted by the API's own
``/v1/messages/count_tokens`` (memoised); when that fails, by an estimate."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import httpx

from mnemo.policy.outbound import redact_outbound_many

from .base import (
    MESSAGE_OVERHEAD_TOKENS,
    ChatMessage,
    ChatStream,
    DeltaSource,
    ProviderError,
    TokenCache,
    estimate_tokens,
)
from .sse import iter_sse, raise_for_status

if TYPE_CHECKING:
    from .auto import ChatSelection

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://api.anthropic.com"
DEFAULT_MODEL = "claude-sonnet-4-5"
API_VERSION = "2023-06-01"
DEFAULT_WINDOW = 200_000


def to_anthropic(messages: Sequence[ChatMessage]) -> tuple[str, list[dict[str, str]]]:
    """System text apart; user/assistant turns merged so roles alternate, starting with the user."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, str]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + m.content
        else:
            turns.append({"role": role, "content": m.content})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": "(conversation continues)"})
    return system, turns


class AnthropicChatProvider:
    name = "anthropic"

    def __init__(
        self,
        endpoint: str = "",
        model: str = "",
        *,
        api_key_env: str = "",
        context_window: int = 0,
        timeout_s: float = 120.0,
        transport: httpx.BaseTransport | None = None,
        selection: ChatSelection | None = None,
    ) -> None:
        self.selection = selection
        self.endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
        self._model = model or DEFAULT_MODEL
        env = api_key_env or "ANTHROPIC_API_KEY"
        key = os.environ.get(env, "")
        if not key:
            log.warning("the anthropic provider has no API key: set %s", env)
        self._client = httpx.Client(
            headers={"x-api-key": key, "anthropic-version": API_VERSION},
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            transport=transport,
        )
        self._window = context_window or DEFAULT_WINDOW
        self._counting = True
        self.count_tokens = TokenCache(self._count)

    @property
    def model(self) -> str:
        return self._model

    @property
    def context_window(self) -> int:
        return self._window

    @property
    def exact_tokens(self) -> bool:
        return self._counting

    def _count(self, text: str) -> int:
        if self._counting:
            url = f"{self.endpoint}/v1/messages/count_tokens"
            body = {"model": self._model, "messages": [{"role": "user", "content": text}]}
            try:
                response = self._client.post(url, json=body)
                response.raise_for_status()
                # The API counts the user turn's own framing too; the agent adds it per message.
                return max(0, int(response.json()["input_tokens"]) - MESSAGE_OVERHEAD_TOKENS)
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                log.warning("token counting at %s failed (%s): estimating from now on", url, exc)
                self._counting = False
        return estimate_tokens(text)

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        cancel: threading.Event | None = None,
    ) -> ChatStream:
        # A remote provider: secrets are redacted before anything leaves the machine.
        contents, _ = redact_outbound_many([m.content for m in messages], "the Anthropic API")
        system, turns = to_anthropic([replace(m, content=c) for m, c in zip(messages, contents, strict=True)])
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "messages": turns,
            "stream": True,
        }
        if system:
            body["system"] = system
        return ChatStream(self._generate(body), cancel)

    def _generate(self, body: dict[str, Any]) -> DeltaSource:
        url = f"{self.endpoint}/v1/messages"
        finish = "stop"
        try:
            with self._client.stream("POST", url, json=body) as response:
                raise_for_status(response, url)
                for event, data in iter_sse(response):
                    try:
                        payload = json.loads(data)
                    except ValueError:
                        log.warning("skipping a malformed stream event from %s", url)
                        continue
                    kind = payload.get("type", event)
                    if kind == "content_block_delta":
                        delta = payload.get("delta") or {}
                        if delta.get("type") == "text_delta" and delta.get("text"):
                            yield str(delta["text"])
                    elif kind == "message_delta":
                        reason = (payload.get("delta") or {}).get("stop_reason")
                        if reason:
                            finish = {"end_turn": "stop", "max_tokens": "length"}.get(reason, str(reason))
                    elif kind == "error":
                        error = payload.get("error") or {}
                        raise ProviderError(
                            f"{url}: {error.get('type', 'error')}: {error.get('message', '')}"
                        )
                    elif kind == "message_stop":
                        break
        except httpx.HTTPError as exc:
            raise ProviderError(f"{url}: {exc}") from exc
        return finish

    def close(self) -> None:
        self._client.close()

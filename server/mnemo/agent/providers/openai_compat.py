"""OpenAI-compatible chat completions over HTTP with SSE streaming (llama.cpp's server, vLLM, Ollama, OpenAI).

Tokens are counted by the server's own tokenizer when it offers one (llama-cpp-python's
``/extras/tokenize``, llama.cpp's ``/tokenize``); otherwise by an estimate, and :attr:`exact_tokens` says so.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx

from mnemo.policy.hosts import url_is_loopback
from mnemo.policy.outbound import redact_outbound_many

from .base import ChatMessage, ChatStream, DeltaSource, ProviderError, TokenCache, estimate_tokens
from .sse import iter_sse, raise_for_status

if TYPE_CHECKING:
    from .auto import ChatSelection

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "http://127.0.0.1:8080/v1"
DEFAULT_WINDOW = 8192


class OpenAIChatProvider:
    name = "openai"

    def __init__(
        self,
        endpoint: str = "",
        model: str = "",
        *,
        api_key_env: str = "",
        context_window: int = 0,
        timeout_s: float = 120.0,
        transport: httpx.BaseTransport | None = None,
        repeat_penalty: float = 1.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        selection: ChatSelection | None = None,
    ) -> None:
        self.endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
        self._model = model or "default"
        self.selection = selection
        # OpenAI's own API refuses fields it does not know: repeat_penalty (llama.cpp's) goes to loopback
        # servers only; the OpenAI penalties only when set.
        self._sampling: dict[str, float] = {}
        if repeat_penalty != 1.0 and url_is_loopback(self.endpoint):
            self._sampling["repeat_penalty"] = repeat_penalty
        if frequency_penalty:
            self._sampling["frequency_penalty"] = frequency_penalty
        if presence_penalty:
            self._sampling["presence_penalty"] = presence_penalty
        key = os.environ.get(api_key_env or "OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout_s, connect=10.0), transport=transport
        )
        self._window = context_window or DEFAULT_WINDOW
        self._tokenize_url: str | None = None
        self._tokenize_probed = False
        self._probe_lock = threading.Lock()
        self.count_tokens = TokenCache(self._count)

    @property
    def model(self) -> str:
        return self._model

    @property
    def context_window(self) -> int:
        return self._window

    @property
    def exact_tokens(self) -> bool:
        self._probe_tokenizer()
        return self._tokenize_url is not None

    # -- tokens -----------------------------------------------------------------------------------
    def _server_root(self) -> str:
        return self.endpoint[: -len("/v1")] if self.endpoint.endswith("/v1") else self.endpoint

    def _tokenize(self, url: str, text: str) -> int:
        body: dict[str, Any] = (
            {"input": text, "model": self._model} if url.endswith("/extras/tokenize") else {"content": text}
        )
        response = self._client.post(url, json=body)
        response.raise_for_status()
        tokens = response.json().get("tokens")
        if not isinstance(tokens, list):
            raise ValueError("no token list in the answer")
        return len(tokens)

    def _probe_tokenizer(self) -> None:
        with self._probe_lock:
            if self._tokenize_probed:
                return
            self._tokenize_probed = True
            root = self._server_root()
            for url in (f"{root}/extras/tokenize", f"{root}/tokenize"):
                try:
                    self._tokenize(url, "probe")
                except (httpx.HTTPError, ValueError):
                    continue
                self._tokenize_url = url
                return
            log.info("%s offers no tokenizer endpoint: token counts are estimates", self.endpoint)

    def _count(self, text: str) -> int:
        self._probe_tokenizer()
        if self._tokenize_url is not None:
            try:
                return self._tokenize(self._tokenize_url, text)
            except (httpx.HTTPError, ValueError) as exc:
                log.warning("tokenize failed (%s); estimating", exc)
        return estimate_tokens(text)

    # -- generation -------------------------------------------------------------------------------
    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        cancel: threading.Event | None = None,
    ) -> ChatStream:
        # A remote provider: secrets are redacted before anything leaves the machine.
        contents, _ = redact_outbound_many([m.content for m in messages], "the chat endpoint")
        body = {
            "model": self._model,
            "messages": [{"role": m.role, "content": c} for m, c in zip(messages, contents, strict=True)],
            "stream": True,
            "max_tokens": max_tokens,
            "temperature": temperature,
            **self._sampling,
        }
        return ChatStream(self._generate(body), cancel)

    def _generate(self, body: dict[str, Any]) -> DeltaSource:
        url = f"{self.endpoint}/chat/completions"
        finish = "stop"
        try:
            with self._client.stream("POST", url, json=body) as response:
                raise_for_status(response, url)
                for _event, data in iter_sse(response):
                    if data.strip() == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        log.warning("skipping a malformed stream event from %s", url)
                        continue
                    if isinstance(chunk.get("error"), dict):
                        raise ProviderError(f"{url}: {chunk['error'].get('message', chunk['error'])}")
                    for choice in chunk.get("choices") or []:
                        delta = (choice.get("delta") or {}).get("content")
                        if delta:
                            yield delta
                        if choice.get("finish_reason"):
                            finish = str(choice["finish_reason"])
        except httpx.HTTPError as exc:
            raise ProviderError(f"{url}: {exc}") from exc
        return finish

    def close(self) -> None:
        self._client.close()

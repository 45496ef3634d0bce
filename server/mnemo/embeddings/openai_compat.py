"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (Ollama, llama-server, OpenAI...)."""

from __future__ import annotations

import email.utils
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import (
    EmbeddingError,
    FloatArray,
    embed_windowed,
    heuristic_token_count,
    split_words_by_budget,
)

if TYPE_CHECKING:
    import httpx

    from mnemo.config import EmbeddingSettings

DEFAULT_MAX_TOKENS = 2048
"""Context assumed for a remote model (Ollama's default context; OpenAI's models take 8191)."""
_BACKOFF_BASE_S = 0.5
_BACKOFF_CAP_S = 20.0
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class OpenAIEmbedder:
    """POSTs batches of texts to ``{endpoint}/embeddings``.

    Texts longer than about ``max_tokens`` (estimated: the remote tokenizer is not at hand) are split
    into windows whose vectors are averaged. The API key is read from the environment variable named by
    ``settings.api_key_env`` on each client creation; it is never logged nor put in an error message.
    """

    provider = "openai"

    def __init__(
        self,
        settings: EmbeddingSettings,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        endpoint = settings.endpoint.rstrip("/")
        self._url = endpoint if endpoint.endswith("/embeddings") else endpoint + "/embeddings"
        self._model_name = settings.model
        self._api_key_env = settings.api_key_env
        self._batch_size = max(1, settings.batch_size)
        self._timeout_s = settings.timeout_s
        self._max_retries = max(0, settings.max_retries)
        self._max_tokens = max_tokens
        self._sleep = sleep
        self._transport = transport
        self._client: httpx.Client | None = None
        self._dims = 0
        self._lock = threading.Lock()
        self.model = f"{settings.model}@{endpoint}"

    # -- Embedder -------------------------------------------------------------------------------

    @property
    def dims(self) -> int:
        if not self._dims:
            self.embed(["dimension probe"])
        return self._dims

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def count_tokens(self, text: str) -> int:
        return heuristic_token_count(text)

    def embed(self, texts: Sequence[str]) -> FloatArray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        budget = max(1, int(self._max_tokens * 0.75))  # margin: the estimate may undercount
        windows: list[list[tuple[str, int]]] = []
        for text in texts:
            pieces = [text] if heuristic_token_count(text) <= budget else split_words_by_budget(text, budget)
            windows.append(
                [(piece if piece.strip() else " ", heuristic_token_count(piece)) for piece in pieces]
            )
        if not windows:
            return np.zeros((0, self._dims), dtype=np.float32)
        vectors = embed_windowed(windows, self._post, self._batch_size, self._dims)
        self._dims = vectors.shape[1]
        return vectors

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # -- HTTP ---------------------------------------------------------------------------------

    def _api_key(self) -> str:
        return os.environ.get(self._api_key_env, "").strip() if self._api_key_env else ""

    def _get_client(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                headers = {"Accept": "application/json"}
                key = self._api_key()
                if key:
                    headers["Authorization"] = f"Bearer {key}"
                self._client = httpx.Client(
                    timeout=httpx.Timeout(self._timeout_s), headers=headers, transport=self._transport
                )
            return self._client

    def _safe(self, message: str) -> str:
        key = self._api_key()
        return message.replace(key, "***") if key else message

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        delay = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * (2**attempt)) * random.uniform(0.5, 1.0)
        if retry_after:
            wait: float | None = None
            try:
                wait = float(retry_after)
            except ValueError:
                when = email.utils.parsedate_to_datetime(retry_after) if retry_after else None
                if when is not None:
                    wait = when.timestamp() - time.time()
            if wait is not None:
                delay = max(delay, min(_BACKOFF_CAP_S, wait))
        return max(0.0, delay)

    def _post(self, texts: list[str]) -> FloatArray:
        import httpx

        from mnemo.policy.outbound import redact_outbound_many

        client = self._get_client()
        texts, _ = redact_outbound_many(texts, self._url)  # secrets never leave for a remote provider
        payload = {"model": self._model_name, "input": texts}
        attempt = 0
        while True:
            problem: str
            retry_after: str | None = None
            try:
                response = client.post(self._url, json=payload)
            except httpx.TransportError as exc:
                problem = f"cannot reach {self._url}: {type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    return self._parse(response, len(texts))
                detail = response.text[:300].strip()
                problem = f"{self._url} answered HTTP {response.status_code}: {detail}"
                if response.status_code not in _RETRY_STATUS:
                    raise EmbeddingError(self._safe(problem))
                retry_after = response.headers.get("retry-after")
            if attempt >= self._max_retries:
                raise EmbeddingError(self._safe(f"{problem} (gave up after {attempt + 1} attempts)"))
            self._sleep(self._backoff(attempt, retry_after))
            attempt += 1

    def _parse(self, response: httpx.Response, expected: int) -> FloatArray:
        def bad(why: str) -> EmbeddingError:
            return EmbeddingError(self._safe(f"bad response from {self._url}: {why}"))

        try:
            body: Any = response.json()
        except ValueError as exc:
            raise bad("not JSON") from exc
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise bad("no 'data' list")
        if len(data) != expected:
            raise bad(f"{len(data)} embeddings for {expected} inputs")
        rows: list[tuple[int, list[float]]] = []
        for position, item in enumerate(data):
            if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
                raise bad(f"item {position} has no 'embedding' list")
            index = item.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool):
                raise bad(f"item {position} has a non-integer index")
            rows.append((index, item["embedding"]))
        rows.sort(key=lambda row: row[0])
        if [index for index, _ in rows] != list(range(expected)):
            raise bad("indices are not 0..n-1")
        lengths = {len(vector) for _, vector in rows}
        if len(lengths) != 1 or 0 in lengths:
            raise bad("embeddings of differing or zero length")
        try:
            array = np.asarray([vector for _, vector in rows], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise bad("embeddings are not numbers") from exc
        if not np.all(np.isfinite(array)):
            raise bad("embeddings hold NaN or infinity")
        if self._dims and array.shape[1] != self._dims:
            raise bad(f"{array.shape[1]} dims where earlier answers had {self._dims}")
        return array

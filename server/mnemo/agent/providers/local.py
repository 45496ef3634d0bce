"""A GGUF chat model run in-process by llama.cpp (llama-cpp-python), streamed token by token."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mnemo.embeddings import EmbeddingError
from mnemo.embeddings.local import _install_quiet_logging, default_threads, gguf_context_length

from .base import ChatMessage, ChatStream, DeltaSource, ProviderError, TokenCache
from .model_file import locate_chat_model

log = logging.getLogger(__name__)

LOCAL_MAX_CONTEXT = 8192
"""Upper bound on the context allocated by default (CPU memory and prompt time grow with it)."""


class LocalChatProvider:
    """Loads the model on first use; generation is serialised (one llama.cpp context)."""

    name = "local"

    def __init__(
        self, model_path: str, cache_dir: Path, *, context_window: int = 0, threads: int = 0
    ) -> None:
        self._model_path = model_path
        self._cache_dir = cache_dir
        self._requested_window = context_window
        self._threads = threads if threads > 0 else default_threads()
        self._lock = threading.RLock()
        self._path: Path | None = None
        self._digest = ""
        self._window = 0
        self._llm: Any = None
        self.count_tokens = TokenCache(self._count)

    # -- model ------------------------------------------------------------------------------------
    def _resolve(self) -> Path:
        with self._lock:
            if self._path is None:
                self._path, self._digest = locate_chat_model(self._model_path, self._cache_dir)
                try:
                    trained = gguf_context_length(self._path)
                except EmbeddingError as exc:
                    raise ProviderError(str(exc)) from exc
                self._window = self._requested_window or min(trained, LOCAL_MAX_CONTEXT)
            return self._path

    def load(self) -> Any:
        """The llama.cpp model, loaded once (a ProviderError says why it cannot be)."""
        with self._lock:
            if self._llm is not None:
                return self._llm
            path = self._resolve()
            try:
                import llama_cpp
            except ImportError as exc:
                raise ProviderError(
                    "the local chat provider needs llama-cpp-python: pip install 'mnemo[local]'"
                ) from exc
            _install_quiet_logging()
            try:
                self._llm = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=self._window,
                    n_threads=self._threads,
                    n_threads_batch=self._threads,
                    verbose=False,
                )
            except (ValueError, RuntimeError) as exc:
                raise ProviderError(f"cannot load the chat model {path}: {exc}") from exc
            log.info("chat model %s loaded (context %d, %d threads)", path.name, self._window, self._threads)
            return self._llm

    @property
    def model(self) -> str:
        path = self._resolve()
        return f"{path.stem}@{self._digest[:12]}"

    @property
    def context_window(self) -> int:
        self._resolve()
        return self._window

    @property
    def exact_tokens(self) -> bool:
        return True

    def _count(self, text: str) -> int:
        llm = self.load()
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    # -- generation -------------------------------------------------------------------------------
    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        cancel: threading.Event | None = None,
    ) -> ChatStream:
        llm = self.load()
        return ChatStream(self._generate(llm, messages, max_tokens, temperature), cancel)

    def _generate(
        self, llm: Any, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> DeltaSource:
        with self._lock:
            chunks = llm.create_chat_completion(
                messages=[{"role": m.role, "content": m.content} for m in messages],
                stream=True,
                max_tokens=max_tokens,
                temperature=temperature,
            )
            finish = "stop"
            try:
                for chunk in chunks:
                    choice = chunk["choices"][0]
                    delta = choice.get("delta", {}).get("content")
                    if delta:
                        yield delta
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
            return str(finish)

    def close(self) -> None:
        if not self._lock.acquire(timeout=5):  # a reply is still generating: leave it to process exit
            log.warning("the chat model is busy; not closed")
            return
        try:
            if self._llm is not None:
                close = getattr(self._llm, "close", None)
                if close is not None:
                    close()
                self._llm = None
        finally:
            self._lock.release()

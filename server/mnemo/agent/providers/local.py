"""A GGUF chat model run by llama.cpp in a child process the server supervises, streamed token by token.

The model never runs in the server's own process: a crash inside llama.cpp (an instruction the CPU
advertises but faults on, out of memory) ends the child only. The turn then fails with a
:class:`ProviderError` that says how the child ended, and the next call starts a fresh one. Whether
llama.cpp may use its optimised "extra buffer types" is measured once per machine
(:mod:`mnemo.native_probe`) or forced by ``[agent] extra_buffer_types``.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mnemo import native_probe
from mnemo.embeddings import EmbeddingError
from mnemo.embeddings.local import default_threads, gguf_context_length, llama_cpp_available

from .base import ChatMessage, ChatStream, DeltaSource, ProviderError, TokenCache
from .model_client import ModelCrashed, ModelProcess, child_command
from .model_file import locate_chat_model

if TYPE_CHECKING:
    from .auto import ChatSelection

log = logging.getLogger(__name__)

LOCAL_MAX_CONTEXT = 8192
"""Upper bound on the context allocated by default (CPU memory and prompt time grow with it)."""

OFF_HINT = 'if it keeps crashing, set [agent] extra_buffer_types = "off" in mnemo.toml'


@dataclass(frozen=True)
class Sampling:
    """Penalties that keep a small model from repeating itself (``[agent]`` settings)."""

    repeat_penalty: float = 1.15
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0


class LocalChatProvider:
    """Starts the model process on first use; calls are serialised (one llama.cpp context)."""

    name = "local"

    def __init__(
        self,
        model_path: str,
        cache_dir: Path,
        *,
        context_window: int = 0,
        threads: int = 0,
        extra_buffer_types: str = "auto",
        command: Callable[[], Sequence[str]] = child_command,
        sampling: Sampling | None = None,
        selection: ChatSelection | None = None,
    ) -> None:
        self._model_path = model_path
        self._sampling = sampling or Sampling()
        self.selection = selection
        self._cache_dir = cache_dir
        self._requested_window = context_window
        self._threads = threads if threads > 0 else default_threads()
        self._mode = extra_buffer_types
        self._lock = threading.RLock()
        self._path: Path | None = None
        self._digest = ""
        self._window = 0
        self._process = ModelProcess(command)
        self._loaded = False
        self._extra = False
        self._plain_after_crash = False
        self._generating: int | None = None  # the thread reading a reply
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

    @property
    def pid(self) -> int | None:
        """The model process's id while it runs (None before the first call and after a crash)."""
        return self._process.pid

    @property
    def extra_buffer_types(self) -> bool:
        """Whether the running model uses llama.cpp's extra (repacked) buffer types."""
        return self._extra

    def _decide_extra(self, path: Path) -> bool:
        if self._plain_after_crash:
            return False
        try:
            return native_probe.extra_buffer_types(path, self._digest, "chat", self._cache_dir, self._mode)
        except native_probe.NativeModelError as exc:
            raise ProviderError(
                f"{exc} (agent.provider = 'openai' or 'anthropic' runs chat elsewhere)"
            ) from exc

    def load(self) -> None:
        """Start the model process and load the model (a ProviderError says why it cannot)."""
        with self._lock:
            if self._loaded and self._process.alive:
                return
            path = self._resolve()
            if not llama_cpp_available():
                raise ProviderError(
                    "the local chat provider needs llama-cpp-python: pip install 'mnemo[local]'"
                )
            self._extra = self._decide_extra(path)
            self._loaded = False
            self._process.start()
            request = {
                "op": "load",
                "path": str(path),
                "n_ctx": self._window,
                "threads": self._threads,
                "extra_buffer_types": self._extra,
            }
            try:
                self._process.call(request)
            except ModelCrashed as exc:
                raise ProviderError(self._crash_message(exc, f"while loading {path.name}")) from exc
            except ProviderError as exc:
                self._process.stop()
                raise ProviderError(f"cannot load the chat model {path}: {exc}") from exc
            self._loaded = True
            log.info(
                "chat model %s loaded in process %s (context %d, %d threads, extra buffer types %s)",
                path.name,
                self._process.pid,
                self._window,
                self._threads,
                "on" if self._extra else "off",
            )

    def _crash_message(self, exc: ModelCrashed, when: str = "while answering") -> str:
        self._loaded = False
        if exc.how == f"signal {signal.SIGILL.name}" and self._extra and self._mode == "auto":
            self._plain_after_crash = True  # an instruction the CPU cannot run: plain kernels from now on
            native_probe.remember(
                self._cache_dir, self._digest, False, f"the chat model process died: {exc.how}"
            )
            return f"{exc} {when}; it restarts without extra buffer types at the next message ({OFF_HINT})"
        return f"{exc} {when}; it restarts at the next message ({OFF_HINT})"

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
        with self._lock:
            if self._generating == threading.get_ident():
                raise ProviderError("count_tokens was called while this thread reads a reply")
            self.load()
            try:
                return int(self._process.call({"op": "count", "text": text})["tokens"])
            except ModelCrashed as exc:
                raise ProviderError(self._crash_message(exc, "while counting tokens")) from exc

    # -- generation -------------------------------------------------------------------------------
    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        cancel: threading.Event | None = None,
    ) -> ChatStream:
        self.load()
        return ChatStream(self._generate(messages, max_tokens, temperature), cancel)

    def _generate(self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float) -> DeltaSource:
        with self._lock:
            self.load()  # the process may have ended since stream() was called
            request = {
                "op": "generate",
                "messages": [{"role": m.role, "content": m.content} for m in messages],
                "max_tokens": max_tokens,
                "temperature": temperature,
                "repeat_penalty": self._sampling.repeat_penalty,
                "frequency_penalty": self._sampling.frequency_penalty,
                "presence_penalty": self._sampling.presence_penalty,
            }
            self._generating = threading.get_ident()
            try:
                return (yield from self._process.stream(request))
            except ModelCrashed as exc:
                raise ProviderError(self._crash_message(exc)) from exc
            finally:
                self._generating = None

    def close(self) -> None:
        if not self._lock.acquire(timeout=5):  # a reply is still generating: kill the process
            log.warning("the chat model is busy; its process is killed")
            self._process.kill()
            return
        try:
            self._process.stop()
            self._loaded = False
        finally:
            self._lock.release()

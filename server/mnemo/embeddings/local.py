"""Local embeddings with llama.cpp (through llama-cpp-python) from a GGUF model.

The default model, all-MiniLM-L6-v2, is converted from its PyPI wheel into the cache folder on first
use (see :mod:`mnemo.embeddings.gguf_convert`). Nothing is loaded before the first call that needs the
model. A text longer than the model's context is tokenized once, cut into windows that each fit, and
the windows' vectors are averaged (weighted by length) and re-normalised.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import io
import logging
import mmap
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from mnemo import filehash, native_probe

from .base import EmbeddingError, FloatArray, embed_windowed
from .gguf_convert import DEFAULT_CONTEXT, DEFAULT_DIMS, DEFAULT_MODEL_NAME, ensure_default_gguf
from .threads import brief_spinning

log = logging.getLogger(__name__)
_llama_log = logging.getLogger("mnemo.embeddings.llama_cpp")

MAX_CONTEXT = 8192
"""Upper bound on the context we allocate, whatever the model was trained for."""

PREPARE_BYTES = 64 * 1024 * 1024
"""Most logits rows :meth:`LocalEmbedder.prepare` makes llama.cpp zero-fill at once (MiniLM's whole
512-token window is 62 MB)."""

ONE_THREAD_TOKENS = 24
"""Texts of up to this many tokens (a search query; [CLS] and [SEP] counted) are decoded on one thread.

With two threads, each of a forward pass's ~100 barriers waits for the partner thread, asleep after its
brief spin (:mod:`.threads`) and, in a virtual machine, on a CPU the host has halted: an 8-token query after
10 ms of other work took 12.2 ms against 5.8 ms on one thread (``benchmarks/bench_query_embed.py``, 2-core
Zen 3 VM), and over LSP the search p95 fell from 21.5-24.6 to 12.1-16.0 ms; longer texts (indexing's
chunks) gain from every thread (docs/benchmarks.md, "Sixteenth round")."""

_log_callback: Any = None  # keeps the ctypes callback alive for as long as the process runs


_MADV_DONTNEED = 4


def _madvise(address: int, length: int) -> bool:
    """``madvise(MADV_DONTNEED)``: the kernel takes the pages back (zero-filled if touched again)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return int(libc.madvise(address, length, _MADV_DONTNEED)) == 0
    except (OSError, AttributeError):
        return False


def llama_cpp_available() -> bool:
    """True when llama-cpp-python is installed (checked without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None


def _install_quiet_logging() -> None:
    """Route llama.cpp's and ggml's log lines to Python logging (DEBUG) instead of stderr."""
    global _log_callback
    if _log_callback is not None:
        return
    brief_spinning()
    import llama_cpp
    import llama_cpp.llama

    @llama_cpp.llama_log_callback
    def _forward(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if _llama_log.isEnabledFor(logging.DEBUG):
            _llama_log.debug("%s", text.decode("utf-8", "replace").rstrip())

    llama_cpp.llama_log_set(_forward, ctypes.c_void_p(0))
    _log_callback = _forward


def default_threads() -> int:
    """llama.cpp threads when the setting is 0: the idle cores now, at least one (see :mod:`.threads`)."""
    from .threads import default_threads as idle_core_threads

    return idle_core_threads()


def gguf_context_length(path: Path) -> int:
    """``<arch>.context_length`` from a GGUF file's metadata (:mod:`.gguf_meta`: read up to it)."""
    from .gguf_meta import GGUFError, context_length

    try:
        return context_length(path)
    except (GGUFError, OSError) as exc:
        raise EmbeddingError(f"{path} is not a readable GGUF model: {exc}") from exc


class LocalEmbedder:
    """A GGUF embedding model run in-process by llama.cpp. Thread-safe (calls are serialised)."""

    provider = "local"

    def __init__(
        self,
        model_path: Path | None,
        models_dir: Path,
        threads: int = 0,
        batch_size: int = 32,
    ) -> None:
        self._user_path = model_path
        self._models_dir = models_dir
        self._threads = threads if threads > 0 else default_threads()
        self._batch_size = max(1, batch_size)
        self._lock = threading.RLock()
        self._resolved: tuple[Path, str] | None = None
        self._llm: Any = None
        self._n_ctx = 0
        self._dims = 0
        self._prefix: list[int] = []
        self._suffix: list[int] = []
        self._released_outputs = 0
        """Output rows whose unused logits were handed back to the kernel (:meth:`_release_logits`)."""
        self._prepared = False
        """The output buffer was grown to a whole window by :meth:`prepare`."""
        self._decode_threads = 0
        """Threads the loaded context decodes with now (:data:`ONE_THREAD_TOKENS`)."""
        self._decoder: ThreadPoolExecutor | None = None
        """The one thread that runs llama.cpp's forward passes (:meth:`_on_decode_thread`)."""

    # -- model file -------------------------------------------------------------------------

    def _resolve(self) -> tuple[Path, str]:
        """(GGUF path, model identity); converts the default model on first use."""
        with self._lock:
            if self._resolved is None:
                if self._user_path is None:
                    path, digest = ensure_default_gguf(self._models_dir)
                    self._resolved = (path, f"{DEFAULT_MODEL_NAME}.f16@{digest[:12]}")
                else:
                    digest = self._user_model_digest(self._user_path)
                    self._resolved = (self._user_path, f"{self._user_path.stem}@{digest[:12]}")
            return self._resolved

    def _user_model_digest(self, path: Path) -> str:
        """sha256 of a user's GGUF, remembered in ``models/hashes.json`` by path, size and mtime."""
        try:
            return filehash.cached_sha256(path, self._models_dir / "hashes.json")
        except OSError as exc:
            raise EmbeddingError(f"embedding.model_path: cannot read {path}: {exc}") from exc

    @property
    def model(self) -> str:
        return self._resolve()[1]

    # -- loading ----------------------------------------------------------------------------

    def _load(self) -> Any:
        with self._lock:
            if self._llm is not None:
                return self._llm
            path, _ = self._resolve()
            if not llama_cpp_available():
                raise EmbeddingError("llama-cpp-python is not installed: run `make install`.")
            _install_quiet_logging()
            import llama_cpp

            n_ctx = max(8, min(MAX_CONTEXT, gguf_context_length(path)))
            pooling = (
                llama_cpp.LLAMA_POOLING_TYPE_MEAN
                if self._user_path is None
                else llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED
            )
            llm: Any = None
            errors: list[str] = []
            extra = self._extra_buffer_types(path)
            for flash_attn in (True, False):
                # verbose=True on purpose: verbose=False makes llama-cpp-python dup2 fds 1 and 2 onto
                # /dev/null while loading, which would swallow LSP messages other threads write to stdout.
                # Its C logging goes to our callback; its Python prints to stderr are caught here.
                captured = io.StringIO()
                try:
                    with (
                        contextlib.redirect_stderr(captured),
                        native_probe.model_params(extra, one_sequence=True),
                    ):
                        llm = llama_cpp.Llama(
                            model_path=str(path),
                            embedding=True,
                            n_ctx=n_ctx,
                            n_batch=n_ctx,
                            n_ubatch=n_ctx,
                            n_threads=self._threads,
                            n_threads_batch=self._threads,
                            flash_attn=flash_attn,
                            pooling_type=pooling,
                            n_gpu_layers=0,
                            verbose=True,
                        )
                    break
                except Exception as exc:  # llama.cpp reports failures as ValueError/RuntimeError
                    errors.append(f"{type(exc).__name__}: {exc}")
                finally:
                    if captured.getvalue():
                        _llama_log.debug("%s", captured.getvalue().rstrip())
            if llm is None:
                raise EmbeddingError(f"llama.cpp cannot load {path}: {'; '.join(errors)}")
            self._n_ctx = llm.n_ctx()
            self._dims = llm.n_embd()
            if self._user_path is None and self._dims != DEFAULT_DIMS:
                llm.close()
                raise EmbeddingError(
                    f"{path}: {self._dims} dims, expected {DEFAULT_DIMS}; reinstall the model"
                )
            with_special = llm.tokenize(b"a", add_bos=True, special=False)
            plain = llm.tokenize(b"a", add_bos=False, special=False)
            start = next(
                (i for i in range(len(with_special)) if with_special[i : i + len(plain)] == plain), 0
            )
            self._prefix = with_special[:start]
            self._suffix = with_special[start + len(plain) :]
            if self._n_ctx - len(self._prefix) - len(self._suffix) < 1:
                llm.close()
                raise EmbeddingError(f"{path}: context of {self._n_ctx} tokens is too small")
            self._llm = llm
            self._decode_threads = self._threads
            log.info("loaded embedding model %s (%d dims, %d tokens)", path.name, self._dims, self._n_ctx)
            return llm

    def prepare(self) -> None:
        """Load the model and grow llama.cpp's output buffer to its largest, once (a server calls this
        at start, before its index opens).

        llama.cpp zero-fills that buffer each time it grows, logits rows included (n_vocab floats a
        token: 62 MB for MiniLM's 512-token window), and :meth:`_release_logits` hands the rows back
        only after the decode. Grown by the first long text of a running server, that is a 62 MB peak
        on top of its loaded index (320-324 MB at 2,000 notes, docs/benchmarks.md); grown here, the
        peak comes while the process is small, and no later decode grows the buffer again (for a model
        whose whole window's rows fit :data:`PREPARE_BYTES`)."""
        llm = self._load()
        with self._lock:
            if self._prepared:
                return
            # A whole window, unless its logits rows would pass PREPARE_BYTES (a model of a large
            # vocabulary or context: a 250,000-token vocabulary is 1 MB a row); longer texts then grow
            # the buffer later, as without this step.
            rows = min(self._n_ctx, max(1, PREPARE_BYTES // (4 * max(1, int(llm.n_vocab())))))
            room = max(0, rows - len(self._prefix) - len(self._suffix))
            filler = llm.tokenize(b"a", add_bos=False, special=False)[:1]
            window = self._prefix + filler * room + self._suffix
        self._on_decode_thread(lambda: self._decode(llm, [window]))
        with self._lock:
            self._prepared = True

    def _extra_buffer_types(self, path: Path) -> bool:
        """Whether llama.cpp may repack this model for the CPU's fastest kernels: probed once per machine
        and model in a child process, so a CPU that faults on them cannot take this process down."""
        try:
            return native_probe.extra_buffer_types(path, self._resolve()[1], "embed", self._models_dir)
        except native_probe.NativeModelError as exc:
            raise EmbeddingError(f"{exc} (embedding.provider = 'openai' or 'none' works without it)") from exc

    # -- Embedder -----------------------------------------------------------------------------

    @property
    def dims(self) -> int:
        """Known without loading for the default model (a sync commits the keyword side of a new index
        before the model has loaded); loads a user's model to read it."""
        if self._llm is None and self._user_path is None:
            return DEFAULT_DIMS
        self._load()
        return self._dims

    @property
    def max_tokens(self) -> int:
        """The model's context in tokens, [CLS]/[SEP] included (512 for MiniLM).

        Known without loading for the default model; loads a user's model to read it."""
        if self._llm is None and self._user_path is None:
            return DEFAULT_CONTEXT
        self._load()
        return self._n_ctx

    def _tokenize(self, text: str) -> list[int]:
        llm = self._load()
        with self._lock:
            tokens: list[int] = llm.tokenize(text.encode("utf-8", "replace"), add_bos=False, special=False)
        return tokens

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's tokenizer, not counting the [CLS]/[SEP] the model adds."""
        return len(self._tokenize(text))

    def token_windows(self, text: str) -> list[list[int]]:
        """The token sequences (special tokens included) that :meth:`embed` runs for ``text``."""
        tokens = self._tokenize(text)
        room = self._n_ctx - len(self._prefix) - len(self._suffix)
        pieces = [tokens[i : i + room] for i in range(0, len(tokens), room)] or [[]]
        return [self._prefix + piece + self._suffix for piece in pieces]

    def embed(self, texts: Sequence[str]) -> FloatArray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        self._load()
        extra = len(self._prefix) + len(self._suffix)
        windows = [[(w, len(w) - extra) for w in self.token_windows(text)] for text in texts]
        return embed_windowed(windows, self._embed_sequences, self._batch_size, self._dims)

    def _embed_sequences(self, sequences: list[list[int]]) -> FloatArray:
        """One llama_decode per sequence: the fastest way for short batches on a CPU. Always on the
        embedder's own thread (:meth:`_on_decode_thread`)."""
        llm = self._load()
        return self._on_decode_thread(lambda: self._decode(llm, sequences))

    def _on_decode_thread(self, work: Callable[[], FloatArray]) -> FloatArray:
        """Run ``work`` on the one thread that calls llama.cpp for this embedder.

        OpenMP keeps a team of worker threads for each thread that starts a parallel region. Searches
        come from a pool of threads (the language server's ``asyncio.to_thread``, the gateway's), so
        decodes from whichever of them ran would wake one of several teams, each mostly asleep: a
        6-token query took ~9 ms from a pool of six threads against ~3.5 ms from one
        (docs/benchmarks.md, "Round of 2026-12-02")."""
        with self._lock:
            if self._decoder is None:
                self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-llama")
            decoder = self._decoder
        return decoder.submit(work).result()

    def _decode(self, llm: Any, sequences: list[list[int]]) -> FloatArray:
        import llama_cpp

        out = np.empty((len(sequences), self._dims), dtype=np.float32)
        with self._lock:
            if llm is not self._llm:  # closed (or reloaded) since it was loaded: never decode a freed one
                raise EmbeddingError("the embedding model was closed while this text waited for it")
            for row, tokens in enumerate(sequences):
                self._use_threads(llm, 1 if len(tokens) <= ONE_THREAD_TOKENS else self._threads)
                llm._batch.reset()
                llm._ctx.kv_cache_clear()
                llm._batch.add_sequence(tokens, 0, True)
                try:
                    llm._ctx.decode(llm._batch)
                except RuntimeError as exc:
                    raise EmbeddingError(f"llama.cpp failed to embed a text: {exc}") from exc
                finally:
                    llm._batch.reset()
                pointer = llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, 0)
                if pointer:
                    vector = np.ctypeslib.as_array(pointer, shape=(self._dims,))
                else:  # a model without pooling: mean over the per-token vectors
                    pointer = llama_cpp.llama_get_embeddings(llm._ctx.ctx)
                    vector = np.ctypeslib.as_array(pointer, shape=(len(tokens), self._dims)).mean(axis=0)
                out[row] = vector
                if len(tokens) > self._released_outputs:  # this decode may have grown the buffer
                    self._release_logits(llm, len(tokens))
        if not np.all(np.isfinite(out)):
            raise EmbeddingError("llama.cpp produced NaN or infinite embeddings")
        return out

    def _use_threads(self, llm: Any, threads: int) -> None:
        """Decode with ``threads`` from now on (a field of the context: nothing is reallocated)."""
        if threads != self._decode_threads:
            llm._ctx.set_n_threads(threads, threads)
            self._decode_threads = threads

    def _release_logits(self, llm: Any, n_tokens: int) -> None:
        """Give back the pages of llama.cpp's logits rows, once per growth of its output buffer.

        In embedding mode llama.cpp makes every token an output and reserves a logits row (n_vocab
        floats: 119 KiB for MiniLM) per output, which a pooled embedding model never uses; the rows are
        touched when the buffer is (re)allocated and stay resident: 30-60 MB of a server's RSS. They are
        not written by later decodes, so releasing them once after the buffer grows keeps them out.

        Called right after the decode of ``n_tokens`` that may have grown it: the logits and embeddings
        pointers describe the last decode's outputs (a shorter text decoded after a longer one in the
        same batch moves the embeddings back, and the layout check below then left the longer text's
        rows resident: 60 MB after a text of two windows, tests/unit/test_embeddings_local.py)."""
        import llama_cpp

        ctx = llm._ctx.ctx
        outputs = max(n_tokens, int(llama_cpp.llama_n_seq_max(ctx)))  # the buffer holds at least these
        if outputs <= self._released_outputs:
            return
        pointer = llama_cpp.llama_get_logits(ctx)
        start = ctypes.cast(pointer, ctypes.c_void_p).value if pointer else None
        if not start:
            return
        end = start + outputs * int(llm.n_vocab()) * 4
        embeddings = llama_cpp.llama_get_embeddings(ctx)
        if not embeddings or (ctypes.cast(embeddings, ctypes.c_void_p).value or 0) < end:
            return  # not the layout this relies on (logits rows, then the embeddings): leave it alone
        page = mmap.PAGESIZE
        low, high = -(-start // page) * page, end // page * page
        if high > low and _madvise(low, high - low):
            self._released_outputs = outputs

    def close(self) -> None:
        with self._lock:
            decoder, self._decoder = self._decoder, None
        if decoder is not None:
            decoder.shutdown(wait=True)  # (a decode in hand finishes first; it takes the lock)
        with self._lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None
                self._released_outputs = 0
                self._prepared = False

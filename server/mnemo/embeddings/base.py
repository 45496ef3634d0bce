"""The embedder interface shared by every provider, plus the helpers they have in common."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from mnemo.text.terms import lazy_pattern

if TYPE_CHECKING:  # NumPy is loaded where vectors are computed: a keyword one-shot search never loads it
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float32]
else:
    FloatArray = "numpy.ndarray[float32]"  # a name for annotations; nothing uses it at run time
T = TypeVar("T")
log = logging.getLogger(__name__)

CACHE_ENV = "MNEMO_CACHE_DIR"


class EmbeddingError(Exception):
    """An embedding could not be produced; the message is meant for the user and never holds secrets."""


@runtime_checkable
class Embedder(Protocol):
    """What the indexer and the search code use; build one with :func:`mnemo.embeddings.build_embedder`.

    Construction is cheap: a model is loaded (and the default one converted) only on the first call
    that needs it (``dims``, ``model`` for a local model, ``count_tokens``, ``embed``).
    """

    @property
    def provider(self) -> str:
        """ "local", "openai" or "none"."""
        ...

    @property
    def model(self) -> str:
        """Identity of the model used in cache keys, e.g. ``all-MiniLM-L6-v2.f16@0123456789ab``."""
        ...

    @property
    def dims(self) -> int:
        """Length of each vector; 0 for the "none" provider."""
        ...

    @property
    def max_tokens(self) -> int:
        """Tokens the model reads at once; longer texts are split into windows, never truncated."""
        ...

    def count_tokens(self, text: str) -> int: ...

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """float32 array of shape [len(texts), dims], each row of L2 norm 1."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Preparable(Protocol):
    """An embedder with a model in this process that can be made ready ahead of the first call."""

    def prepare(self) -> None:
        """Load the model and reserve its largest working buffers now (a server does this at start,
        while the process is small and before the index opens). Raises EmbeddingError."""
        ...


def prepare(embedder: Embedder) -> None:
    """Load an in-process embedding model now, before the index opens: what a long-lived server does at
    start. Its first search then does not wait for the model, and the model's one-time peak comes while
    the process is small (:meth:`mnemo.embeddings.local.LocalEmbedder.prepare`). Nothing for a remote
    provider or none. A model that cannot load is logged; the searches that need it say so. Never
    raises: it only saves time and memory later, and a server's start must not fail for it."""
    if not isinstance(embedder, Preparable):
        return
    try:
        embedder.prepare()
    except EmbeddingError as exc:
        log.warning("the embedding model did not load: %s", exc)
    except Exception as exc:  # an unexpected error of the model's library: the first embed says more
        log.warning("preparing the embedding model failed: %s", exc, exc_info=True)


def default_cache_dir(cache_dir: Path | None = None) -> Path:
    """mnemo's cache root: ``cache_dir`` if given, else ``$MNEMO_CACHE_DIR``, else the user cache dir."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("mnemo"))


_CJK_CLASS = (
    "[\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]"
)
# Compiled on first use (a few ms each; ASCII text never needs them).
_CJK_FINDALL = lazy_pattern(globals(), "_CJK_FINDALL", _CJK_CLASS, "findall")
_CJK_SUB = lazy_pattern(globals(), "_CJK_SUB", _CJK_CLASS, "sub")


def heuristic_token_count(text: str) -> int:
    """Rough token count for models whose tokenizer is not at hand.

    ``round(words * 1.3)`` where words are whitespace-separated runs, plus one per CJK character
    (those scripts do not separate words with spaces); at least 1.
    """
    if text.isascii():
        return max(1, round(len(text.split()) * 1.3))
    cjk = len(_CJK_FINDALL(text))
    words = len(_CJK_SUB(" ", text).split())
    return max(1, round(words * 1.3) + cjk)


def _word_cost(word: str) -> float:
    if word.isascii():
        return max(1.3, len(word) / 4)
    cjk = len(_CJK_FINDALL(word))
    return cjk + sum(max(1.3, len(w) / 4) for w in _CJK_SUB(" ", word).split())


def split_words_by_budget(text: str, budget: int) -> list[str]:
    """Split ``text`` into pieces whose estimated token count stays within ``budget``.

    Used by providers whose tokenizer is remote. Words are kept whole where they fit; a CJK character
    counts one token, a long word one per 4 characters, and a word over the budget is cut.
    """
    budget = max(1, budget)
    pieces: list[str] = []
    current: list[str] = []
    used = 0.0
    words: list[str] = []
    for word in text.split():
        cost = _word_cost(word)
        if cost <= budget:
            words.append(word)
            continue
        size = max(1, int(len(word) * budget / cost))
        words.extend(word[i : i + size] for i in range(0, len(word), size))
    for word in words:
        cost = _word_cost(word)
        if current and used + cost > budget:
            pieces.append(" ".join(current))
            current, used = [], 0.0
        current.append(word)
        used += cost
    if current:
        pieces.append(" ".join(current))
    return pieces or [text]


def l2_normalize(vectors: npt.ArrayLike) -> FloatArray:
    """Rows scaled to unit length (all-zero rows stay zero)."""
    import numpy as np

    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2:
        raise EmbeddingError(f"expected a 2-D array of vectors, got shape {arr.shape}")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


def embed_windowed(
    windows_per_text: Sequence[Sequence[tuple[T, int]]],
    embed_batch: Callable[[list[T]], FloatArray],
    batch_size: int,
    dims: int,
) -> FloatArray:
    """Embed texts already split into windows (payload, weight) and average each text's windows.

    Each window's unit vector is weighted by its length (in tokens), the weighted mean re-normalised;
    a text that fits in one window simply gets that window's vector. ``dims`` 0: taken from the vectors.
    """
    import numpy as np

    flat: list[T] = []
    owners: list[int] = []
    weights: list[float] = []
    for i, windows in enumerate(windows_per_text):
        for payload, weight in windows:
            flat.append(payload)
            owners.append(i)
            weights.append(float(max(1, weight)))
    if not flat:
        return np.zeros((len(windows_per_text), dims), dtype=np.float32)
    step = max(1, batch_size)
    parts = [embed_batch(flat[start : start + step]) for start in range(0, len(flat), step)]
    vectors = l2_normalize(np.concatenate(parts, axis=0))
    dims = dims or vectors.shape[1]
    if vectors.shape != (len(flat), dims):
        raise EmbeddingError(f"expected {len(flat)} vectors of {dims} dims, got shape {vectors.shape}")
    out = np.zeros((len(windows_per_text), dims), dtype=np.float32)
    np.add.at(out, np.asarray(owners), vectors * np.asarray(weights, dtype=np.float32)[:, None])
    return l2_normalize(out)

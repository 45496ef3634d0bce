"""Pick and build the embedder that ``[embedding]`` in mnemo.toml asks for."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .base import Embedder, EmbeddingError, FloatArray, default_cache_dir, heuristic_token_count

if TYPE_CHECKING:
    from mnemo.config import EmbeddingSettings


class NoneEmbedder:
    """provider = "none": BM25-only search. ``dims`` is 0 and :meth:`embed` returns an empty
    ``[len(texts), 0]`` float32 array (it never raises), so callers need no special case to stay safe."""

    provider = "none"
    model = "none"

    @property
    def dims(self) -> int:
        return 0

    @property
    def max_tokens(self) -> int:
        return 512

    def count_tokens(self, text: str) -> int:
        return heuristic_token_count(text)

    def embed(self, texts: Sequence[str]) -> FloatArray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        import numpy as np

        return np.zeros((len(texts), 0), dtype=np.float32)

    def close(self) -> None:
        pass


def uses_bundled_english_model(settings: EmbeddingSettings) -> bool:
    """Whether vectors come from the bundled all-MiniLM-L6-v2, an English-only model (provider local and no
    model_path: what :func:`build_embedder` resolves to the converted default)."""
    return settings.provider in ("local", "auto") and not settings.model_path.strip()


def build_embedder(settings: EmbeddingSettings, cache_dir: Path | None = None) -> Embedder:
    """Build the configured embedder without loading any model (that happens on first use).

    ``cache_dir`` is mnemo's cache root (default: ``$MNEMO_CACHE_DIR``, else the user cache folder);
    the converted default model goes to ``<cache_dir>/models/``.
    Raises EmbeddingError when the provider cannot work at all (e.g. llama-cpp-python missing).
    """
    if settings.provider == "none":
        return NoneEmbedder()
    if settings.provider == "openai":
        from .openai_compat import OpenAIEmbedder

        if not settings.endpoint.strip():
            raise EmbeddingError("embedding.endpoint is empty: set the URL of an OpenAI-compatible API")
        return OpenAIEmbedder(settings)
    if settings.provider in ("local", "auto"):  # auto not chosen by the composition root: the default model
        from .local import LocalEmbedder, llama_cpp_available

        if not llama_cpp_available():
            raise EmbeddingError(
                "Local embeddings need llama-cpp-python, which is not installed: run `make install` "
                "(or set embedding.provider = 'openai' or 'none' in mnemo.toml)."
            )
        model_path = None if uses_bundled_english_model(settings) else Path(settings.model_path).expanduser()
        if model_path is not None and not model_path.is_file():
            raise EmbeddingError(f"embedding.model_path: no such file: {model_path}")
        return LocalEmbedder(
            model_path=model_path,
            threads=settings.threads,
            models_dir=default_cache_dir(cache_dir) / "models",
            batch_size=settings.batch_size,
        )
    if settings.provider == "use-m3":
        from .use_m3 import UseM3Embedder

        return UseM3Embedder(threads=settings.threads, batch_size=max(settings.batch_size, 1))
    raise EmbeddingError(f"embedding.provider: unknown provider {settings.provider!r}")

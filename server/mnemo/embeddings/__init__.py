"""Text embeddings for mnemo: local llama.cpp (default), multilingual USE-m3 (numpy), an OpenAI-compatible
endpoint, or none.

>>> from mnemo.config import EmbeddingSettings
>>> embedder = build_embedder(EmbeddingSettings(provider="none"))
>>> embedder.embed(["hello"]).shape
(1, 0)
"""

from __future__ import annotations

from .base import (
    Embedder,
    EmbeddingError,
    Preparable,
    default_cache_dir,
    heuristic_token_count,
    l2_normalize,
    prepare,
)
from .factory import NoneEmbedder, build_embedder, uses_bundled_english_model

__all__ = [
    "Embedder",
    "EmbeddingError",
    "NoneEmbedder",
    "Preparable",
    "build_embedder",
    "default_cache_dir",
    "heuristic_token_count",
    "l2_normalize",
    "prepare",
    "uses_bundled_english_model",
]

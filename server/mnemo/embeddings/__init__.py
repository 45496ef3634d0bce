"""Text embeddings for mnemo: local llama.cpp (default), multilingual USE-m3 (numpy), an OpenAI-compatible
endpoint, or none.

>>> from mnemo.config import EmbeddingSettings
>>> embedder = build_embedder(EmbeddingSettings(provider="none"))
>>> embedder.embed(["hello"]).shape
(1, 0)
"""

from __future__ import annotations

from .base import Embedder, EmbeddingError, default_cache_dir, heuristic_token_count, l2_normalize
from .factory import NoneEmbedder, build_embedder, uses_bundled_english_model

__all__ = [
    "Embedder",
    "EmbeddingError",
    "NoneEmbedder",
    "build_embedder",
    "default_cache_dir",
    "heuristic_token_count",
    "l2_normalize",
    "uses_bundled_english_model",
]

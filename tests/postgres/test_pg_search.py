"""Hybrid search through the memory service with ``[index] backend = "postgres"``: English, Chinese and
mixed queries, filters, editor buffers, removed files."""

from __future__ import annotations

from pathlib import Path

from mnemo.services import Services, build_services
from tests.conftest import HashEmbedder
from tests.postgres.helpers import check_pg_consistent


def _services(root: Path, namespace: str) -> Services:
    services = build_services(root, provider="none")
    embedder = HashEmbedder(dims=16, model=f"hash@{namespace}")
    memory = services.memory
    memory.embedder = memory.indexer.embedder = memory.searcher.embedder = embedder
    return services


def _paths(services: Services, query: str, **kwargs: object) -> list[str]:
    outcome = services.memory.search(query, record=False, **kwargs)  # type: ignore[arg-type]
    assert outcome.mode == "hybrid", outcome.notes
    return [hit.path for hit in outcome.results]


def test_hybrid_search_in_english_chinese_and_mixed(
    team_workspace: Path, namespace: str, pg_env: str
) -> None:
    services = _services(team_workspace, namespace)
    try:
        report = services.memory.sync()
        assert report.files_indexed == 5 and report.chunks_pending == 0
        assert services.memory.status().index == f"postgresql:{namespace}"
        assert pg_env not in repr(services.memory.status()), "the DSN is never shown"
        assert _paths(services, "PostgreSQL row-level security")[0] == "MEMORY.md"
        assert _paths(services, "API 设计评审")[0] == "memory/2026-11-02.md"
        assert _paths(services, "订单系统迁移到哪里")[0] == "memory/中文笔记.md"
        mixed = _paths(services, "billing 数据库集群")
        assert {"memory/中文笔记.md", "MEMORY.md"} <= set(mixed)
        assert _paths(services, "billing database", filters={"kinds": ["daily"]}) == ["memory/2026-11-02.md"]
    finally:
        services.close()


def test_buffers_edits_and_removals_reach_search(team_workspace: Path, namespace: str, pg_env: str) -> None:
    services = _services(team_workspace, namespace)
    memory = services.memory
    try:
        memory.sync()
        memory.schedule_buffer(
            "memory/gardening.md", "# Gardening\n\nThe quokkas ate the basil.\n", delay_s=60
        )
        assert _paths(services, "quokkas basil")[0] == "memory/gardening.md"
        (team_workspace / "memory" / "gardening.md").unlink()
        memory.schedule_buffer("memory/gardening.md", None, delay_s=0)
        memory.apply_pending()
        memory.sync()
        assert "memory/gardening.md" not in _paths(services, "quokkas basil tomatoes")
        (team_workspace / "memory" / "2026-11-09.md").write_text(
            "# 2026-11-09\n\n- 周会决定采用向量数据库。\n"
        )
        memory.sync()
        assert _paths(services, "向量数据库")[0] == "memory/2026-11-09.md"
        counts = check_pg_consistent(pg_env, namespace)
        status = memory.status()
        assert (status.files, status.chunks) == (counts["files"], counts["chunks"]) and counts["files"] == 5
        assert memory.sync(full=True).rebuilt  # `mnemo index --full`: a new generation, swapped in
        assert _paths(services, "向量数据库")[0] == "memory/2026-11-09.md"
        assert check_pg_consistent(pg_env, namespace) == counts
    finally:
        services.close()


def test_a_same_size_write_in_the_same_tick_reaches_the_shared_index(
    team_workspace: Path, namespace: str, pg_env: str
) -> None:
    """A note written again within its mtime's tick with the same size, after a sync read it: this
    machine's stat cache saw no change and the shared index kept the old text (tests/unit/test_racy_files)."""
    import os

    note = team_workspace / "memory" / "stack.md"
    note.write_text(
        "# Stack\n\nThe billing database runs Postgres 15 on the blue cluster.\n", encoding="utf-8"
    )
    services = _services(team_workspace, namespace)
    try:
        services.memory.sync()
        before = note.stat()
        note.write_text(
            "# Stack\n\nThe billing database runs Postgres 16 on the teal cluster.\n", encoding="utf-8"
        )
        os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert note.stat().st_size == before.st_size
        assert services.memory.sync().files_indexed == 1
        assert _paths(services, "Postgres teal cluster")[0] == "memory/stack.md"
    finally:
        services.close()

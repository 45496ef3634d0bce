"""Feedback on chat turns with ``[index] backend = "postgres"``: the DuckDB engine's feedback tests
(tests/unit/test_feedback.py) run again here against the throwaway cluster, then what only a shared
database has: the tallies are the namespace's, seen by every teammate's process and by no other
namespace, and they outlive a rebuild (a new generation)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mnemo.services import Services, build_services
from tests.conftest import SAMPLE_NOTES, write_files
from tests.postgres.conftest import team_toml
from tests.postgres.helpers import fresh_database
from tests.unit import test_feedback as duck
from tests.unit.test_feedback import (  # noqa: F401 - collected again here, with this module's services
    test_a_memory_search_tool_call_counts_for_its_turn_and_its_success_is_harvested,
    test_a_second_thumbs_on_the_same_answer_replaces_the_first,
    test_a_thumbs_up_is_recorded_on_every_chunk_the_turn_recalled,
    test_each_turn_gets_only_its_own_searches,
    test_feedback_survives_a_full_rebuild,
    test_harvest_reads_a_correction_in_the_next_message,
    test_the_hover_shows_the_tally,
    test_the_prior_is_off_by_default_and_bounded_when_on,
    test_unknown_sessions_and_turns_are_refused_plainly,
)


def _keyword_services(root: Path) -> Services:
    """Keyword mode, as the DuckDB tests: which chunks a turn recalled does not hang on a fake embedding."""
    services = build_services(root, provider="none")
    assert services.memory.indexer.__class__.__name__ == "PgIndexer"
    return services


@pytest.fixture
def services(team_workspace: Path) -> Iterator[Services]:
    built = _keyword_services(team_workspace)
    built.memory.sync()
    try:
        yield built
    finally:
        built.close()


def _rows(dsn: str, namespace: str) -> int:
    with psycopg.connect(dsn) as con:
        row = con.execute("SELECT count(*) FROM mnemo.feedback WHERE namespace = %s", [namespace]).fetchone()
    return int(row[0]) if row else 0


def test_a_teammate_sees_the_tally_and_another_namespace_does_not(
    services: Services, tmp_path: Path, namespace: str, pg_env: str
) -> None:
    reply = duck._agent(services, services.workspace.root).chat(duck.BILLING)
    services.memory.feedback.record(reply.session_id, None, True)
    assert _rows(pg_env, namespace) > 0

    teammate_root = (
        tmp_path / "teammate"
    )  # another checkout of the same repository, another process's services
    write_files(teammate_root, {**SAMPLE_NOTES, "mnemo.toml": team_toml(namespace)})
    teammate = _keyword_services(teammate_root)
    other_root = tmp_path / "other"
    write_files(other_root, {**SAMPLE_NOTES, "mnemo.toml": team_toml(f"{namespace}-other")})
    other = _keyword_services(other_root)
    try:
        teammate.memory.sync()
        other.memory.sync()
        assert duck._tally(teammate, "MEMORY.md", "PostgreSQL") == (1, 0)
        assert duck._tally(other, "MEMORY.md", "PostgreSQL") == (0, 0)
        teammate.memory.settings.search.usefulness_weight = 0.5
        hits = teammate.memory.search("billing database", record=False).results
        assert any("feedback: useful 1 / not 0" in r for h in hits for r in h.parts.reasons)
    finally:
        teammate.close()
        other.close()


def test_feedback_is_kept_by_namespace_across_generations(
    services: Services, namespace: str, pg_env: str
) -> None:
    """A rebuild fills a new generation and drops the old one; the namespace's feedback stays put (nothing
    is copied: no rows are lost or doubled)."""
    reply = duck._agent(services, services.workspace.root).chat(duck.BILLING)
    services.memory.feedback.record(reply.session_id, None, False)
    before = _rows(pg_env, namespace)
    assert services.memory.sync(full=True).rebuilt
    assert _rows(pg_env, namespace) == before > 0
    assert duck._tally(services, "MEMORY.md", "PostgreSQL") == (0, 1)


def test_harvest_through_the_memory_service(services: Any) -> None:
    tool = '<tool_call>{"name": "memory_search", "arguments": {"query": "tomatoes sun watering"}}</tool_call>'
    reply = duck._agent(services, services.workspace.root, tool, "Full sun.").chat(
        "Anything about my garden?"
    )
    harvested = services.memory.harvest_feedback(reply.session_id)
    assert [(r.turn, r.signal, r.useful) for r in harvested] == [(1, "tool", True)]
    assert services.memory.harvest_feedback(reply.session_id) == []


def test_a_database_from_before_feedback_gets_its_table_from_the_first_newer_mnemo(
    make_workspace: Any, pg_dsn: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemo.index import pg_schema
    from mnemo.index.pg_connect import connect

    dsn = fresh_database(pg_dsn, "mnemo_feedback_upgrade")
    con = connect(dsn, vectors=False)
    try:
        pg_schema.migrate(con, upto=2)  # what the previous release left
    finally:
        con.close()
    monkeypatch.setenv("MNEMO_PG_DSN", dsn)
    services = _keyword_services(make_workspace(SAMPLE_NOTES, toml=team_toml(namespace)))
    try:
        services.memory.sync()
        reply = duck._agent(services, services.workspace.root).chat(duck.BILLING)
        services.memory.feedback.record(reply.session_id, None, True)
        assert duck._tally(services, "MEMORY.md", "PostgreSQL") == (1, 0)
        assert _rows(dsn, namespace) > 0
    finally:
        services.close()
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS mnemo_feedback_upgrade WITH (FORCE)")

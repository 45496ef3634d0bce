"""docs/team.md's roles and row-level security, run as written: a member role indexes and searches its
team's namespace and can neither see nor create another's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from mnemo.config import ChunkingSettings, IndexSettings
from mnemo.errors import IndexUnavailable
from mnemo.index.pg_indexer import PgIndexer
from mnemo.text.terms import query_terms
from mnemo.workspace.layout import Workspace
from tests.conftest import SAMPLE_NOTES, HashEmbedder, write_files

DOCS = Path(__file__).resolve().parents[2] / "docs" / "team.md"


def documented_rls_sql() -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("CREATE ROLE team_platform NOLOGIN;")
    return text[start : text.index("```", start)]


@pytest.fixture
def rls_dsn(pg_dsn: str) -> Iterator[str]:
    """A database of its own (roles are the cluster's: created once)."""
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS mnemo_rls")
        admin.execute("CREATE DATABASE mnemo_rls")
        for role in ("alice", "team_platform"):
            admin.execute(f"DROP ROLE IF EXISTS {role}")
    yield pg_dsn.rsplit("/", 1)[0] + "/mnemo_rls"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS mnemo_rls WITH (FORCE)")


def _indexer(root: Path, dsn: str, namespace: str) -> PgIndexer:
    embedder = HashEmbedder(model="hash@rls")
    return PgIndexer(
        Workspace(root, ignore=[".mnemo"]),
        embedder,
        IndexSettings(),
        ChunkingSettings(),
        dsn=dsn,
        namespace=namespace,
    )


def test_a_member_role_works_in_its_namespace_only(tmp_path: Path, rls_dsn: str) -> None:
    owner_ws, alice_ws = tmp_path / "owner", tmp_path / "alice"
    write_files(owner_ws, SAMPLE_NOTES)
    write_files(alice_ws, {**SAMPLE_NOTES, "memory/alice.md": "# Alice\n\nThe zebracorn rollout.\n"})
    for namespace in ("platform-team", "other-team"):  # the owner's first `mnemo index`
        owner = _indexer(owner_ws, rls_dsn, namespace)
        owner.sync()
        owner.close()
    feedback = (
        "INSERT INTO mnemo.feedback(namespace, chunk_key, session_id, turn, useful, signal) "
        "VALUES (%s, 'k', 's', 1, true, 'explicit')"
    )
    with psycopg.connect(rls_dsn, autocommit=True) as con:
        for namespace in ("platform-team", "other-team"):
            con.execute(feedback, [namespace])
        con.execute(documented_rls_sql())
    alice_dsn = rls_dsn.replace("mnemo@", "alice@")
    with psycopg.connect(alice_dsn) as con:
        assert con.execute("SELECT namespace FROM mnemo.generations").fetchall() == [("platform-team",)]
        assert con.execute("SELECT DISTINCT namespace FROM mnemo.feedback").fetchall() == [("platform-team",)]
        con.execute(feedback, ["platform-team"])  # her thumbs on her team's memory
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            con.execute(feedback, ["other-team"])
    mine = _indexer(alice_ws, alice_dsn, "platform-team")
    try:
        report = mine.sync()
        assert (report.files_indexed, report.rebuilt) == (1, False), "only her new note is written"
        with mine.reading() as reader:
            assert reader is not None
            (hit,) = reader.keyword_top(query_terms("zebracorn"), 3)
            assert reader.records([hit.chunk_id])[hit.chunk_id].path == "memory/alice.md"
    finally:
        mine.close()
    theirs = _indexer(alice_ws, alice_dsn, "other-team")
    try:
        with pytest.raises(IndexUnavailable, match="row-level security"):
            theirs.sync()
    finally:
        theirs.close()

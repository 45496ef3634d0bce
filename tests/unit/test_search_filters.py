"""Search filters (issue 18, point 10): kinds, front-matter tags/project/type and dates restrict the
candidates before ranking, through the real index (keyword mode) and the vector query."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest

from mnemo.index.reader_sql import vector_literal, vector_query
from mnemo.index.store import ChunkRow, ChunkStore, IndexIdentity
from mnemo.memory.limits import InvalidInput
from mnemo.search.filters import check_filters
from mnemo.services import Services, build_services

SEPTEMBER = {
    # Strong matches, all before October: without filters they fill the top of the list.
    f"memory/2025-09-{day:02d}.md": f"# Billing\n\nDecision: billing decision number {day}, billing decisions "
    "reviewed; billing decisions about billing.\n"
    for day in range(1, 21)
}
NOTES = {
    **SEPTEMBER,
    "memory/2025-10-07.md": "# Standup\n\nDecisions about billing: we move to annual plans, starting with the "
    "customers who asked for it during the quarterly review of the sales team.\n",
    "memory/2025-11-03.md": "# Review\n\nDecisions about billing: invoices are emailed on the 1st.\n",
    "memory/billing.md": "---\ntags: [Billing, decisions]\nproject: Atlas\ntype: decision\ndate: 2025-10-20\n---\n"
    "# Billing\n\nDecisions about billing: Stripe for the Atlas project, chosen over the in-house "
    "invoicing code that the team maintained before.\n",
    "memory/ops.md": "---\ntags:\n  - ops\n  - billing\nproject: hermes\n---\n# Ops\n\n"
    "Decisions about billing dashboards: they live in Grafana.\n",
    "MEMORY.md": "# Memory\n\n- Decisions about billing are reviewed every month.\n",
    "skills/invoice/SKILL.md": "---\nname: invoice\ndescription: billing decisions helper\n---\n"
    "# Invoice\n\nA checklist for decisions about billing.\n",
}
QUERY = "decisions about billing"


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory, write_tree) -> Iterator[Services]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("filters-ws")
    write_tree(root, NOTES)
    s = build_services(root, provider="none")
    s.memory.sync()
    yield s
    s.close()


def _paths(services: Services, filters: object, k: int = 5) -> list[str]:
    return [h.path for h in services.memory.search(QUERY, max_results=k, filters=filters).results]


def test_decisions_about_billing_since_october(services: Services) -> None:
    unfiltered = _paths(services, None, k=6)
    assert any(p.startswith("memory/2025-09-") for p in unfiltered)
    found = _paths(services, {"since": "2025-10-01"}, k=6)
    assert set(found) == {"memory/2025-10-07.md", "memory/2025-11-03.md", "memory/billing.md"}


def test_filters_restrict_candidates_before_ranking(services: Services) -> None:
    """The oldest notes are not even among the unfiltered candidates (k * 4 of them): a filter applied
    to the top-k afterwards would return nothing; applied before ranking it finds them."""
    candidates = [h.path for h in services.memory.search(QUERY, max_results=8, min_score=0.0).results]
    oldest = {"memory/2025-09-01.md", "memory/2025-09-02.md", "memory/2025-09-03.md"}
    assert not oldest & set(candidates)
    found = _paths(services, {"until": "2025-09-03"}, k=2)
    assert len(found) == 2 and set(found) <= oldest


def test_until_and_range(services: Services) -> None:
    assert set(_paths(services, {"since": "2025-10-01", "until": "2025-10-31"}, k=10)) == {
        "memory/2025-10-07.md",
        "memory/billing.md",  # dated by its front matter
    }
    assert all(p <= "memory/2025-09-05.md" for p in _paths(services, {"until": "2025-09-05"}, k=10))


def test_kinds(services: Services) -> None:
    assert _paths(services, {"kinds": ["memory"]}) == ["MEMORY.md"]
    assert set(_paths(services, {"kinds": ["topic"]})) == {"memory/billing.md", "memory/ops.md"}
    assert _paths(services, {"kinds": ["skill"]}) == ["skills/invoice/SKILL.md"]
    both = set(_paths(services, {"kinds": ["memory", "skill"]}))
    assert both == {"MEMORY.md", "skills/invoice/SKILL.md"}
    assert all(p.startswith("memory/2025-") for p in _paths(services, {"kinds": ["daily"]}, k=30))


def test_tags_project_type(services: Services) -> None:
    assert set(_paths(services, {"tags": ["billing"]})) == {"memory/billing.md", "memory/ops.md"}
    assert _paths(services, {"tags": ["#Billing", "decisions"]}) == ["memory/billing.md"]  # every tag
    assert _paths(services, {"tags": ["ops"]}) == ["memory/ops.md"]
    assert _paths(services, {"project": "atlas"}) == ["memory/billing.md"]
    assert _paths(services, {"project": "HERMES"}) == ["memory/ops.md"]
    assert _paths(services, {"type": "decision"}) == ["memory/billing.md"]


def test_nothing_matches_says_so(services: Services) -> None:
    outcome = services.memory.search(QUERY, filters={"tags": ["no-such-tag"]})
    assert outcome.results == []
    assert "no memory matches the filters" in outcome.notes


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"since": "October"}, "filters.since"),
        ({"until": "2025-13-01"}, "YYYY-MM-DD"),
        ({"since": "2026-W09-1"}, "YYYY-MM-DD"),  # (Python 3.11's fromisoformat: an ISO week date)
        ({"since": "20260301xx"}, "YYYY-MM-DD"),
        ({"until": "20260301  "}, "YYYY-MM-DD"),
        ({"kinds": ["notes"]}, "unknown kind"),
        ({"tags": "billing", "colour": "red"}, "unknown filter"),
        ({"tags": [3]}, "filters.tags"),
        ({"since": "2025-11-01", "until": "2025-10-01"}, "after"),
        ("billing", "must be an object"),
    ],
)
def test_bad_filters_are_invalid_input(services: Services, filters: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        services.memory.search(QUERY, filters=filters)


def test_empty_filters_filter_nothing() -> None:
    assert check_filters({}) is None
    assert check_filters({"tags": [], "project": " "}) is None
    assert check_filters({"tags": "Billing"}).tags == ("billing",)  # type: ignore[union-attr]


def test_index_from_before_the_table_is_filled_on_sync(make_workspace) -> None:  # type: ignore[no-untyped-def]
    root: Path = make_workspace(NOTES)
    s = build_services(root, provider="none")
    try:
        s.memory.sync()
        store = s.memory.indexer.store
        assert store is not None
        store.con.execute("DELETE FROM file_meta")  # as an index built before file_meta existed
        assert _paths(s, {"project": "atlas"}) == []
        s.memory.sync()  # unchanged files: only their metadata rows are written
        assert _paths(s, {"project": "atlas"}) == ["memory/billing.md"]
        (root / "memory/ops.md").unlink()
        s.memory.sync()
        assert store.con.execute(
            "SELECT count(*) FROM file_meta WHERE path = 'memory/ops.md'"
        ).fetchone() == (0,)
    finally:
        s.close()


def test_edits_keep_one_files_and_file_meta_row_that_says_what_the_note_says_now(make_workspace) -> None:  # type: ignore[no-untyped-def]
    """A note's rows are updated in place (files) or left alone when its front matter did not change
    (file_meta): after each edit, one row each, and the filters and the file's state follow the text."""
    root: Path = make_workspace(NOTES)
    s = build_services(root, provider="none")
    note = root / "memory/billing.md"
    original = note.read_text(encoding="utf-8")

    def rows() -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
        con = s.memory.indexer.store.con
        files = con.execute("SELECT hash, size FROM files WHERE path = 'memory/billing.md'").fetchall()
        meta = con.execute("SELECT tags, project FROM file_meta WHERE path = 'memory/billing.md'").fetchall()
        return files, meta

    try:
        s.memory.sync()
        before = rows()
        note.write_text(original + "\nA new paragraph about quokka invoices.\n", encoding="utf-8")
        assert s.memory.sync().files_indexed == 1
        files, meta = rows()
        assert len(files) == 1 and files != before[0] and files[0][1] == note.stat().st_size
        assert meta == before[1] == [(["billing", "decisions"], "Atlas")]
        assert _paths(s, {"project": "atlas"}) == ["memory/billing.md"]
        note.write_text(original.replace("project: Atlas", "project: Hermes"), encoding="utf-8")
        s.memory.sync()
        assert rows()[1] == [(["billing", "decisions"], "Hermes")]
        assert _paths(s, {"project": "atlas"}) == [] and "memory/billing.md" in _paths(
            s, {"project": "hermes"}
        )
        note.write_text(original.split("---\n", 2)[2], encoding="utf-8")  # the front matter removed
        s.memory.sync()
        assert rows()[1] == [([], None)] and "memory/billing.md" not in _paths(s, {"tags": ["billing"]})
        assert s.memory.indexer.store.con.execute("SELECT count(*) FROM files").fetchone() == (len(NOTES),)
    finally:
        s.close()


def test_vector_query_within_allowed_ids(tmp_path: Path) -> None:
    dims, n = 8, 40
    store = ChunkStore.create(tmp_path / "index.duckdb.building", IndexIdentity("test", "m", dims, "c"))
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(n, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = [
        ChunkRow(f"k{i}", f"memory/n{i}.md", "memory", "evergreen", None, 1, 1, "", "t", "t", f"h{i}")
        for i in range(n)
    ]
    store.insert_chunks(rows, vectors, live=False)
    store.finish_indexes()
    ids = [r[0] for r in store.con.execute("SELECT id FROM chunks ORDER BY id").fetchall()]
    allowed = ids[20:]
    query = vectors[3]  # its nearest chunk (itself) is not allowed
    got = store.con.execute(vector_query(vector_literal(query), 5, within=allowed)).fetchall()
    assert {row[0] for row in got} <= set(allowed) and len(got) == 5
    exact = [ids[20 + int(i)] for i in np.argsort(-(vectors[20:] @ query))[:5]]
    assert [row[0] for row in got] == exact
    store.con.close()


def test_file_meta_table_is_added_to_an_older_index(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    store = ChunkStore.create(path, IndexIdentity("none", "", 0, "c"))
    store.con.execute("DROP TABLE file_meta")
    store.close()
    con = duckdb.connect(str(path))
    reopened = ChunkStore(path, con, IndexIdentity("none", "", 0, "c"))
    assert reopened.con.execute("SELECT count(*) FROM file_meta").fetchone() == (0,)
    con.close()

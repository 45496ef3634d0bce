"""Issue 20 with the real local MiniLM: updates, the bounded MEMORY.md weight and the calibrated cut-off."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest
from tests.conftest import local_model_services

from mnemo.services import Services

TODAY = date(2026, 11, 30)
NOTES = {
    "MEMORY.md": "# Memory\n\n## Facts\n\n- The billing service uses PostgreSQL.\n- Prefer small pull requests.\n",
    "memory/2026-06-10.md": (
        "# 2026-06-10\n\n## Decisions\n\n- Decision: the billing database will be CockroachDB.\n"
        "- Reviewed Dana's pull request for the search service.\n"
    ),
    "memory/2026-10-02.md": (
        "# 2026-10-02\n\n## Decisions\n\n- Final decision: we are moving the billing database to PostgreSQL.\n"
        "- Sprint planning ran long.\n"
    ),
    "memory/2026-11-20.md": (
        "# 2026-11-20\n\n## Decisions\n\n- Final decision: we are moving the payments database to MySQL.\n"
        "- Lunch with Hiro; talked about hiring.\n"
    ),
    "memory/2026-09-14.md": (
        "# 2026-09-14\n\n## Infra\n\n- Set up pgbouncer in transaction mode as the pooler in front of the billing Postgres.\n"
        "- Lunch with Hiro; talked about hiring.\n"
    ),
    "memory/2026-08-01.md": "# 2026-08-01\n\n## Tooling\n\n- For Atlas we settled on Ruff to both format and lint the code.\n",
    "memory/2026-08-05.md": "# 2026-08-05\n\n## Log\n\n- Interviewed a backend candidate; strong on databases.\n",
    "memory/oncall.md": "# On-call\n\n## Weekdays\n\n- Elif carries the pager Monday to Friday.\n",
}


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    s = local_model_services(tmp_path_factory.mktemp("recall-model-ws"), NOTES)
    yield s
    s.close()


@pytest.mark.model
class TestRecallWithTheLocalModel:
    def test_the_newest_decision_comes_first_and_stays(self, hybrid: Services) -> None:
        out = hybrid.memory.search("what did we decide about the billing database", today=TODAY)
        decisions = [
            h.path for h in out.results if h.path in ("memory/2026-06-10.md", "memory/2026-10-02.md")
        ]
        assert decisions and decisions[0] == "memory/2026-10-02.md", [h.citation for h in out.results]
        assert all(0.0 <= h.parts.score <= 1.0 for h in out.results)

    def test_update_is_decided_on_the_answering_line(self, hybrid: Services) -> None:
        out = hybrid.memory.search("what did we decide about the billing database", today=TODAY)
        by_path = {h.path: h.parts for h in out.results}
        assert "memory/2026-06-10.md" in by_path, "the older version stays in the list"
        assert "superseded by memory/2026-10-02.md#L5" in by_path["memory/2026-06-10.md"].reasons
        newest = by_path["memory/2026-10-02.md"]
        assert not newest.superseded, "a newer decision about the payments database updates nothing here"
        assert newest.line == 5

    def test_memory_md_does_not_beat_the_clear_answer(self, hybrid: Services) -> None:
        out = hybrid.memory.search("connection pooler for the billing database", today=TODAY)
        paths = [h.path for h in out.results]
        assert paths[0] == "memory/2026-09-14.md", [(h.path, round(h.parts.score, 3)) for h in out.results]

    def test_paraphrase_is_not_cut(self, hybrid: Services) -> None:
        out = hybrid.memory.search("which formatter and linter do I use", today=TODAY)
        assert out.results and out.results[0].path == "memory/2026-08-01.md", out.notes

    def test_no_heading_only_results(self, hybrid: Services) -> None:
        out = hybrid.memory.search("who is on call", min_score=0.0, today=TODAY)
        assert out.results
        for h in out.results:
            lines = h.snippet.splitlines()
            assert not all(line.lstrip().startswith("#") or not line.strip() for line in lines), h.citation

    def test_unrelated_query_has_no_results(self, hybrid: Services) -> None:
        out = hybrid.memory.search("quantum chromodynamics lattice gauge", today=TODAY)
        assert out.results == [], [(h.citation, h.parts.vector) for h in out.results]

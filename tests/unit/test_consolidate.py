"""Consolidation (issue 18, point 9): near-duplicate memory lines across files, one line per cluster, as a
proposal the user reviews; and ``search.one_per_file``.

Real parts: files on disk, the MemoryService over DuckDB, the CLI's ``main``, a chat model behind a real
OpenAI-compatible HTTP endpoint on loopback (tests/fake_chat_endpoint.py).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.fake_chat_endpoint import agent_toml, chat_endpoint

from mnemo.agent import ScriptedProvider
from mnemo.cli.main import main
from mnemo.editor import consolidation, hygiene
from mnemo.editor.consolidator import ChatMerger, ConsolidationConflict, ConsolidationError, Consolidator
from mnemo.editor.memory_edits import TextEdit

NOTES = {
    "MEMORY.md": "# Memory\n\n## Preferences\n- Coffee: dark roast, no sugar.\n- Prefer small pull requests.\n",
    "memory/2026-11-02.md": (
        "# 2026-11-02\n\n- The billing service uses PostgreSQL with row-level security.\n"
        "- Coffee preference: dark roast, no sugar, oat milk.\n"
    ),
    "memory/2026-11-20.md": (
        "# 2026-11-20\n\n- Billing service uses PostgreSQL with row-level security enabled. "
        "<!-- session:abc turn:2 -->\n- Met Alice about hiring."
    ),
}


def _lines(
    path: str, text: str, day: date = date(2026, 11, 1), rank: int = 0
) -> list[consolidation.MemoryLine]:
    return consolidation.memory_lines(path, text, day=day, rank=rank)


def _apply_edits(text: str, edits: list[TextEdit]) -> str:
    """Apply editor edits (ASCII text: UTF-16 columns are character offsets) from last to first."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    out = text
    for e in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        a, b = offsets[e.start[0]] + e.start[1], offsets[e.end[0]] + e.end[1]
        out = out[:a] + e.new_text + out[b:]
    return out


# -- the pure part ---------------------------------------------------------------------------------------
def test_memory_lines_are_content_lines_with_marker_and_comment_apart() -> None:
    text = (
        "---\ntags: [a]\n---\n# Title\n\n- [ ] Renew the TLS certificate before March. <!-- session:s turn:1 -->\n"
        "```\ncode line that is long enough here\n```\n- ok\n1. Pay the invoice for the hosting plan.\n"
    )
    found = _lines("memory/x.md", text)
    assert [(m.line, m.prefix, m.body, m.suffix.strip()) for m in found] == [
        (6, "- [ ] ", "Renew the TLS certificate before March.", "<!-- session:s turn:1 -->"),
        (11, "1. ", "Pay the invoice for the hosting plan.", ""),
    ]


def test_clusters_span_files_and_never_join_a_file_with_itself() -> None:
    same = _lines(
        "memory/a.md", "- The billing service uses PostgreSQL.\n- The billing service uses PostgreSQL.\n"
    )
    other = _lines("memory/b.md", "- Billing service uses PostgreSQL now.\n- Lunch with Dana on Friday.\n")
    found = consolidation.clusters(same + other, 0.6)
    assert [[m.citation for m in c] for c in found] == [
        ["memory/a.md#L1", "memory/a.md#L2", "memory/b.md#L1"]
    ]
    assert consolidation.clusters(same, 0.6) == []


def test_lines_of_chunks_near_duplicate_by_vector_need_less_overlap() -> None:
    a = _lines("memory/a.md", "- Deploys go out on Tuesdays after the standup.\n")
    b = _lines("memory/b.md", "- Release train leaves Tuesdays after standup.\n")
    assert consolidation.LINKED_OVERLAP <= consolidation.overlap(a[0], b[0]) < 0.6
    assert consolidation.clusters(a + b, 0.6) == []
    assert len(consolidation.clusters(a + b, 0.6, [(a, b)])) == 1


def test_near_duplicate_pairs_reuse_the_hygiene_similarity() -> None:
    v = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    w = np.array([0.99, 0.1, 0.0], dtype=np.float32)
    text = "a chunk of text long enough to be compared as a duplicate"
    chunks = [
        hygiene.ChunkVector("memory/a.md", 1, 3, "", text, v),
        hygiene.ChunkVector("memory/a.md", 5, 7, "", text, v),  # same file: never a pair
        hygiene.ChunkVector("memory/b.md", 1, 3, "", text, w),
        hygiene.ChunkVector("memory/c.md", 1, 3, "", text, np.array([0, 1.0, 0], dtype=np.float32)),
    ]
    pairs = hygiene.near_duplicate_pairs(chunks, 0.92)
    assert sorted((a.path, a.start_line, b.path) for a, b, _ in pairs) == [
        ("memory/a.md", 1, "memory/b.md"),
        ("memory/a.md", 5, "memory/b.md"),
    ]


def test_the_newest_text_goes_to_the_most_durable_copy() -> None:
    old = _lines("MEMORY.md", "- Coffee: dark roast, no sugar.\n", date(2026, 1, 1), rank=2)
    new = _lines("memory/2026-11-02.md", "- Coffee: dark roast, no sugar, oat milk.\n", date(2026, 11, 2))
    (cluster,) = consolidation.clusters(old + new, 0.6)
    assert consolidation.newest(cluster).path == "memory/2026-11-02.md"
    assert consolidation.home(cluster).path == "MEMORY.md"


def test_crlf_lines_and_a_byte_order_mark_survive_a_merge() -> None:
    """A CRLF MEMORY.md with a BOM: every line kept lost its CR (mixed line ends, and each kept line
    counted as a change), and a first line's BOM hid its list marker, so a newer text replaced
    "\ufeff- ..." by the bare text."""
    memory = "\ufeff- Staging database runs Postgres 15 on db-stage-2\r\n\r\n- The team uses ripgrep for search\r\n"
    daily = "# 2026-11-03\n\n- Staging database runs Postgres 16 on db-stage-2\n- The team uses ripgrep for search\n"
    old = _lines("MEMORY.md", memory, date(2026, 1, 1), rank=2)
    new = _lines("memory/2026-11-03.md", daily, date(2026, 11, 3))
    assert [(m.prefix, m.body, m.suffix) for m in old] == [
        ("\ufeff- ", "Staging database runs Postgres 15 on db-stage-2", ""),
        ("- ", "The team uses ripgrep for search", ""),
    ]
    merges = []
    for cluster in consolidation.clusters(old + new, 0.6):
        keep = consolidation.home(cluster)
        merges.append(consolidation.Merge(tuple(cluster), keep, consolidation.newest(cluster).body, "newest"))
    found = consolidation.changes(merges)
    assert found["MEMORY.md"].replace == {1: "\ufeff- Staging database runs Postgres 16 on db-stage-2"}
    assert consolidation.apply_change(memory, found["MEMORY.md"]) == memory.replace("15", "16")
    # An editor's line ends before its CR (LSP): an edit whose range ran over it was cut there by the
    # editor, and the CR in its new text made a second line end ("\r\r\n").
    (edit,) = consolidation.text_edits("MEMORY.md", memory, found["MEMORY.md"])
    assert edit.end == (0, len(memory.split("\r\n")[0])) and "\r" not in edit.new_text
    assert _apply_edits(memory, [edit]) == memory.replace("15", "16")
    assert consolidation.apply_change(daily, found["memory/2026-11-03.md"]) == "# 2026-11-03\n\n"


def test_edits_match_the_text_change_even_at_the_end_of_a_file() -> None:
    text = "# Notes\n- keep this line here\n- drop the second to last line\n- drop the last line too"
    change = consolidation.FileChange(replace={2: "- kept, and merged"}, delete={3, 4})
    edits = consolidation.text_edits("memory/n.md", text, change)
    assert (
        _apply_edits(text, edits) == consolidation.apply_change(text, change) == "# Notes\n- kept, and merged"
    )
    spans = [(e.start, e.end) for e in edits]
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # no overlap


def test_a_model_merge_is_checked_before_it_is_used() -> None:
    cluster = _lines("memory/a.md", "- Coffee: dark roast, no sugar.\n") + _lines(
        "memory/b.md", "- Coffee: dark roast with oat milk.\n"
    )
    assert consolidation.check_merged("Coffee: dark roast, no sugar, oat milk.", cluster) is None
    assert "no copy has: espresso" in str(consolidation.check_merged("Coffee: espresso, no sugar.", cluster))
    assert "more than one line" in str(consolidation.check_merged("Coffee\ndark roast", cluster))
    assert consolidation.merged_body('"- Coffee: dark roast."') == "Coffee: dark roast."


# -- the consolidator over real files ----------------------------------------------------------------------
@pytest.fixture
def services(make_workspace: Callable[..., Path], services_factory: Callable[..., Any]) -> Any:
    root = make_workspace(NOTES)
    built = services_factory(root)
    built.memory.sync()
    return built


def test_a_proposal_writes_nothing_and_apply_writes_it(
    services: Any, md_hashes: Callable[[Path], Any]
) -> None:
    root = services.workspace.root
    before = md_hashes(root)
    consolidator = Consolidator(services.memory, services.settings)
    proposal = consolidator.propose()
    assert md_hashes(root) == before
    assert sorted(m.keep.citation for m in proposal.merges) == ["MEMORY.md#L4", "memory/2026-11-20.md#L3"]
    assert all(m.how == "newest" for m in proposal.merges)
    assert "-- Coffee preference: dark roast, no sugar, oat milk." in proposal.diff()
    assert consolidator.apply(proposal) == ["memory/2026-11-02.md"]
    assert (root / "memory/2026-11-02.md").read_text() == "# 2026-11-02\n\n"
    assert (
        "row-level security enabled. <!-- session:abc turn:2 -->"
        in (root / "memory/2026-11-20.md").read_text()
    )
    assert consolidator.propose().merges == []


def test_a_write_that_fails_leaves_the_file_whole(services: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`consolidate --apply` wrote in place: a full disk (or a quota, or a crash) mid-write cut the
    file short (a 1,504-line MEMORY.md kept 986 lines) and the command ended in a traceback."""
    import errno
    import os

    from mnemo import atomic_file

    root = services.workspace.root
    before = (root / "memory/2026-11-02.md").read_bytes()
    consolidator = Consolidator(services.memory, services.settings)
    proposal = consolidator.propose()
    real_write = os.write

    def disk_full(fd: int, data: Any) -> int:
        real_write(fd, bytes(data[:5]))  # part of it lands, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_file.os, "write", disk_full)
    with pytest.raises(ConsolidationError, match=r"cannot write memory/2026-11-02\.md \(No space left"):
        consolidator.apply(proposal)
    assert (root / "memory/2026-11-02.md").read_bytes() == before
    assert not [p.name for p in (root / "memory").iterdir() if p.name.endswith(".tmp")]
    monkeypatch.undo()
    assert consolidator.apply(proposal) == ["memory/2026-11-02.md"]


def test_a_memory_md_fact_is_as_old_as_its_commit_not_its_files_last_change(
    make_workspace: Callable[..., Path], services_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """MEMORY.md's lines were dated by the file's last change: after any edit of it today, its stale
    "Postgres 15" beat a daily note's newer "Postgres 16", and the newer fact was proposed for deletion.
    In a Git workspace (mnemo commits memory) a line is as old as the commit that last changed it."""
    from mnemo.editor.vcs import MemoryRepo

    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "test@example.com")
        monkeypatch.setenv(f"GIT_{who}_DATE", "2026-01-05T10:00:00+00:00")
    root = make_workspace(
        {
            "MEMORY.md": "# Memory\n\n- Staging database runs Postgres 15 on host db-stage-2.\n",
            "memory/2026-11-03.md": "# 2026-11-03\n\n- Staging database runs Postgres 16 on host db-stage-2.\n",
        }
    )
    services = services_factory(root)
    MemoryRepo(services.workspace).commit(init_repo=True, message="memory")
    with (root / "MEMORY.md").open("a", encoding="utf-8") as f:  # edited today, another line
        f.write("- Prefer small pull requests in every repository.\n")
    services.memory.sync()
    (merge,) = Consolidator(services.memory, services.settings).propose(use_model=False).merges
    assert merge.keep.path == "MEMORY.md" and "Postgres 16" in merge.text, merge


def test_apply_refuses_a_file_changed_since_the_proposal(services: Any) -> None:
    root = services.workspace.root
    consolidator = Consolidator(services.memory, services.settings)
    proposal = consolidator.propose()
    (root / "memory/2026-11-02.md").write_text(NOTES["memory/2026-11-02.md"] + "- one more line\n")
    changed = (root / "memory/2026-11-02.md").read_text()
    with pytest.raises(ConsolidationConflict, match="changed since the proposal"):
        consolidator.apply(proposal)
    assert (root / "memory/2026-11-02.md").read_text() == changed


def test_an_unsaved_buffer_wins_over_the_disk(services: Any) -> None:
    consolidator = Consolidator(services.memory, services.settings)
    buffers = {"memory/2026-11-02.md": "# 2026-11-02\n\n- Something else entirely today.\n"}
    assert len(consolidator.propose().merges) == 2
    assert consolidator.propose(buffers).merges == []  # both duplicates were in that file
    assert consolidator.for_line("MEMORY.md", 4) is not None
    line = consolidator.for_line("MEMORY.md", 4, buffers)
    assert line is None  # its duplicate is gone from the buffer


def test_the_chat_model_merges_and_a_bad_merge_falls_back_to_the_newest(services: Any) -> None:
    merged = "Coffee: dark roast, no sugar, oat milk."
    provider = ScriptedProvider([merged, "Billing runs on Oracle now."])
    consolidator = Consolidator(services.memory, services.settings, ChatMerger(provider), "scripted")
    proposal = consolidator.propose()
    by_keep = {m.keep.citation: m for m in proposal.merges}
    assert by_keep["MEMORY.md#L4"].how == "model"
    assert by_keep["MEMORY.md#L4"].new_line == f"- {merged}"
    billing = by_keep["memory/2026-11-20.md#L3"]
    assert billing.how == "newest" and "no copy has: now, oracle" in billing.note
    # The model saw the copies oldest first (MEMORY.md was written today, after the note of 2026-11-02).
    asked = provider.calls[0][-1].content.splitlines()
    assert asked == [
        "- Coffee preference: dark roast, no sugar, oat milk.",
        "- Coffee: dark roast, no sugar.",
    ]
    assert consolidator.propose(use_model=False).merges[0].how == "newest"


# -- the command line -----------------------------------------------------------------------------------
def test_cli_prints_the_diff_and_writes_only_with_apply(
    services: Any, capsys: pytest.CaptureFixture[str], md_hashes: Callable[[Path], Any]
) -> None:
    root = services.workspace.root
    services.close()
    before = md_hashes(root)
    assert main(["consolidate", "-w", str(root), "--no-model"]) == 0
    out = capsys.readouterr().out
    assert "2 cluster(s) of near-duplicate memories" in out and "--- a/memory/2026-11-02.md" in out
    assert "nothing written" in out and md_hashes(root) == before
    assert main(["consolidate", "-w", str(root), "--no-model", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {c["keep"] for c in shown["clusters"]} == {"MEMORY.md#L4", "memory/2026-11-20.md#L3"}
    assert main(["consolidate", "-w", str(root), "--no-model", "--apply"]) == 0
    assert "wrote 1 file(s): memory/2026-11-02.md" in capsys.readouterr().out
    assert md_hashes(root) != before


def test_cli_merges_with_a_configured_model(
    make_workspace: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    with chat_endpoint(lambda messages: ("Coffee: dark roast, no sugar, oat milk.", "stop")) as endpoint:
        root = make_workspace(
            {k: v for k, v in NOTES.items() if k != "memory/2026-11-20.md"},
            toml='[embedding]\nprovider = "none"\n' + agent_toml(endpoint.url),
        )
        assert main(["consolidate", "-w", str(root), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [c["how"] for c in shown["clusters"]] == ["model"]
    assert shown["clusters"][0]["text"] == "- Coffee: dark roast, no sugar, oat milk."
    assert "scripted" in shown["model"]
    assert endpoint.requests and "oldest first" in json.dumps(endpoint.requests[0])


# -- one chunk per file ---------------------------------------------------------------------------------
def test_one_per_file_keeps_each_files_best_chunk(
    make_workspace: Callable[..., Path], services_factory: Callable[..., Any]
) -> None:
    root = make_workspace(
        {
            "memory/runbook.md": "# Runbook\n\n## Deploy\n\nDeploy the billing service with make deploy.\n\n"
            "## Rollback\n\nRoll back the billing service deploy with make rollback.\n",
            "memory/2026-11-02.md": "# 2026-11-02\n\n- The billing deploy failed on a migration.\n",
        }
    )
    services = services_factory(root)
    services.memory.sync()
    every = [h.path for h in services.memory.search("billing deploy", record=False).results]
    assert every.count("memory/runbook.md") == 2
    one = services.memory.search("billing deploy", record=False, one_per_file=True).results
    assert sorted(h.path for h in one) == ["memory/2026-11-02.md", "memory/runbook.md"]
    assert any("best of 2 chunks of this file" in r for h in one for r in h.parts.reasons)
    services.memory.settings.search.one_per_file = True
    assert len(services.memory.search("billing deploy", record=False).results) == 2
    again = services.memory.search("billing deploy", record=False, one_per_file=False).results
    assert len(again) == 3


def test_cli_search_one_per_file(
    make_workspace: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_workspace(
        {
            "memory/runbook.md": "# Runbook\n\n## Deploy\n\nDeploy the billing service with make deploy.\n\n"
            "## Rollback\n\nRoll back the billing service deploy with make rollback.\n",
            "memory/2026-11-02.md": "# 2026-11-02\n\n- The billing deploy failed on a migration.\n",
        },
        toml='[embedding]\nprovider = "none"\n',
    )
    assert main(["search", "-w", str(root), "billing deploy", "--json"]) == 0
    every = [r["path"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert every.count("memory/runbook.md") == 2
    assert main(["search", "-w", str(root), "billing deploy", "--json", "--one-per-file"]) == 0
    one = [r["path"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert sorted(one) == ["memory/2026-11-02.md", "memory/runbook.md"]


def test_code_actions_reuse_the_word_proposal_until_a_memory_text_changes(
    services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemo.editor import consolidation

    calls: list[int] = []
    clusters = consolidation.clusters

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return clusters(*args, **kwargs)

    monkeypatch.setattr(consolidation, "clusters", counted)
    first = Consolidator(services.memory, services.settings).for_line("MEMORY.md", 4)
    again = Consolidator(services.memory, services.settings).for_line("MEMORY.md", 4)  # a new request
    assert first is not None and again is not None and again.merges == first.merges
    assert len(calls) == 1
    root = services.workspace.root
    (root / "memory/2026-11-02.md").write_text("# 2026-11-02\n\n- Something else entirely today.\n")
    assert Consolidator(services.memory, services.settings).for_line("MEMORY.md", 4) is None
    assert len(calls) == 2


def test_a_file_rewritten_within_its_tick_is_read_again(services: Any) -> None:
    """The files' texts are kept by (path, mtime, size) between requests: a note written again within its
    mtime's tick, with the same size, kept its old text, so every proposal was made from it and every
    apply refused it as "changed since the proposal" (tests/unit/test_racy_files.py)."""
    import os

    root = services.workspace.root
    note = root / "memory/2026-11-02.md"
    assert len(Consolidator(services.memory, services.settings).propose().merges) == 2
    before = note.stat()
    old = "- Coffee preference: dark roast, no sugar, oat milk."
    new = "- Tea: sencha, never sweetened, rarely with lemon!!!"
    assert len(new) == len(old)
    note.write_text(NOTES["memory/2026-11-02.md"].replace(old, new), encoding="utf-8")
    os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
    consolidator = Consolidator(services.memory, services.settings)
    proposal = consolidator.propose()
    assert [m.keep.citation for m in proposal.merges] == ["memory/2026-11-20.md#L3"]
    assert consolidator.apply(proposal) == ["memory/2026-11-02.md"]
    assert note.read_text(encoding="utf-8") == f"# 2026-11-02\n\n{new}\n"


def test_a_commit_is_dated_by_the_users_local_day(
    make_workspace: Callable[..., Path], services_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Daily notes are named by the local day; commits were dated in UTC. West of Greenwich, a MEMORY.md
    fact committed on a local evening passed for the next day's, tied with that day's daily note, and
    the daily note's newer value was proposed for deletion."""
    import time

    from mnemo.editor.vcs import MemoryRepo

    monkeypatch.setenv("TZ", "Etc/GMT+12")  # UTC-12
    time.tzset()
    try:
        for who in ("AUTHOR", "COMMITTER"):
            monkeypatch.setenv(f"GIT_{who}_NAME", "Test")
            monkeypatch.setenv(f"GIT_{who}_EMAIL", "test@example.com")
            monkeypatch.setenv(f"GIT_{who}_DATE", "2026-11-20T13:00:00-12:00")  # 2026-11-21 01:00 UTC
        root = make_workspace(
            {"MEMORY.md": "# Memory\n\n- The staging database password rotates every 30 days.\n"}
        )
        services = services_factory(root)
        MemoryRepo(services.workspace).commit(init_repo=True, message="memory")
        (root / "memory").mkdir()
        (root / "memory/2026-11-21.md").write_text(
            "# 2026-11-21\n\n- The staging database password rotates every 90 days.\n", encoding="utf-8"
        )
        services.memory.sync()
        (merge,) = Consolidator(services.memory, services.settings).propose(use_model=False).merges
        assert "90 days" in merge.text, merge
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_file_with_lone_cr_line_ends_is_left_alone(
    make_workspace: Callable[..., Path],
    services_factory: Callable[..., Any],
    md_hashes: Callable[[Path], Any],
) -> None:
    """Lines were split at LF only: a daily note saved with CR line ends (an old Mac's) was one line, and
    a merge with its first fact deleted the whole file's facts, "- Ask Bob" with them."""
    root = make_workspace(
        {
            "MEMORY.md": "# Memory\n\n- The staging database password rotates every 90 days\n",
            "memory/2026-11-01.md": b"- The staging database password rotates every 30 days\r- Ask Bob\r",
        }
    )
    services = services_factory(root)
    services.memory.sync()
    before = md_hashes(root)
    proposal = Consolidator(services.memory, services.settings).propose(use_model=False)
    assert "memory/2026-11-01.md" not in proposal.changes
    assert main(["consolidate", "--apply", "--no-model", "-w", str(root)]) == 0
    assert md_hashes(root) == before

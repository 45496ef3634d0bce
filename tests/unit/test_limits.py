"""Bounded input: long queries are cut with a note; bad from / lines / maxResults are errors on every front.

The LSP front is tested in tests/lsp/test_memory_requests.py, the gateway's in tests/gateway/test_rpc_limits.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.unit.test_cli_discovery import run_several

from mnemo.memory.limits import MAX_LINE, InvalidInput, check_line_range, check_max_results, cut_query

NOTES = {
    "MEMORY.md": "# Memory\n\n- The billing service uses PostgreSQL.\n- Coffee: dark roast.\n",
    "mnemo.toml": '[embedding]\nprovider = "none"\n',
}


def test_checks() -> None:
    assert check_max_results(None) is None and check_max_results(1) == 1 and check_max_results(200) == 200
    for bad in (0, -1, 201, 10**12, True, 2.5, "3"):
        with pytest.raises(InvalidInput, match="'maxResults'"):
            check_max_results(bad)
    assert check_line_range(None, None) == (None, None)
    assert check_line_range(3, 10) == (3, 10)
    for start, lines, field in [
        (0, None, "from"),
        (-1, 5, "from"),
        (None, -3, "lines"),
        (None, 0, "lines"),
        (MAX_LINE + 1, None, "from"),
        (1, 10**30, "lines"),
        (1, False, "lines"),
    ]:
        with pytest.raises(InvalidInput, match=f"'{field}'"):
            check_line_range(start, lines)
    assert cut_query("short", 10) == ("short", None)
    cut, note = cut_query("x" * 5000, 4096)
    assert cut == "x" * 4096 and note is not None and "4096 of 5000" in note and "max_query_chars" in note


def test_memory_service_cuts_long_queries_and_refuses_bad_ranges(
    make_workspace: Callable[..., Path], services_factory: Callable[..., Any]
) -> None:
    root = make_workspace({"MEMORY.md": NOTES["MEMORY.md"]})
    memory = services_factory(root).memory
    memory.sync()
    query = "PostgreSQL billing " + "lorem ipsum dolor sit amet " * 4000  # ~108 KB, as in the report
    started = time.monotonic()
    outcome = memory.search(query)
    seconds = time.monotonic() - started
    assert len(outcome.query) == 4096
    assert any("cut to its first 4096 of" in note for note in outcome.notes), outcome.notes
    assert [hit.path for hit in outcome.results] == ["MEMORY.md"]
    assert seconds < 10, f"a cut query still took {seconds:.1f}s"
    short = memory.search("PostgreSQL")
    assert not any("cut" in note for note in short.notes)
    for bad in (0, -5, 500):
        with pytest.raises(InvalidInput):
            memory.search("PostgreSQL", max_results=bad)
    with pytest.raises(InvalidInput, match="'lines'"):
        memory.get("MEMORY.md", None, -3)
    with pytest.raises(InvalidInput, match="'from'"):
        memory.get("MEMORY.md", 0, None)
    assert memory.get("MEMORY.md", 3, 1).text == "- The billing service uses PostgreSQL."


def test_max_query_chars_setting(
    make_workspace: Callable[..., Path], services_factory: Callable[..., Any]
) -> None:
    root = make_workspace({"MEMORY.md": NOTES["MEMORY.md"]}, toml="[search]\nmax_query_chars = 100\n")
    memory = services_factory(root).memory
    memory.sync()
    outcome = memory.search("PostgreSQL " + "y" * 200)
    assert len(outcome.query) == 100 and any("first 100 of 211" in n for n in outcome.notes)


def test_cli_bounds_are_usage_errors(tmp_path: Path) -> None:
    """The report: `mnemo get --lines -3` printed empty text and exited 0."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, text in NOTES.items():
        (ws / name).write_text(text, encoding="utf-8")
    cases = {
        ("get", "MEMORY.md", "--lines", "-3"): "'lines'",
        ("get", "MEMORY.md", "--lines", "0"): "'lines'",
        ("get", "MEMORY.md", "--from", "0"): "'from'",
        ("get", "MEMORY.md", "--from", "-2"): "'from'",
        ("get", "MEMORY.md", "--from", str(10**12)): "'from'",
        ("search", "-k", "0", "billing"): "'maxResults'",
        ("search", "-k", "-1", "billing"): "'maxResults'",
        ("search", "-k", "100000", "billing"): "'maxResults'",
    }
    results = run_several([list(argv) for argv in cases], ws, tmp_path)
    for (argv, code, err, out), field in zip(results, cases.values(), strict=True):
        assert code == 2, (argv, code, err, out)
        assert out == "" and err.startswith("mnemo: ") and field in err, (argv, err, out)
        assert "Traceback" not in err
    ok = run_several([["get", "MEMORY.md", "--from", "3", "--lines", "1"]], ws, tmp_path)[0]
    assert ok[1] == 0 and ok[3].strip() == "- The billing service uses PostgreSQL."


def test_cli_prints_the_cut_note(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, text in NOTES.items():
        (ws / name).write_text(text, encoding="utf-8")
    query = "PostgreSQL " + "z" * 6000
    done = subprocess.run(
        [sys.executable, "-m", "mnemo", "search", "-w", str(ws), query],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "note: the query was cut to its first 4096 of 6011 characters" in done.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "mnemo", "search", "--json", "--no-sync", "-w", str(ws), query],
        capture_output=True,
        text=True,
        timeout=120,
    )
    outcome = json.loads(as_json.stdout)
    assert len(outcome["query"]) == 4096 and any("cut" in n for n in outcome["notes"])

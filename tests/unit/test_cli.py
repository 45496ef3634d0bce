"""The command line, run as a real process (``python -m mnemo``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest


def mnemo(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mnemo", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_help_mentions_commands_and_options() -> None:
    top = mnemo("--help")
    assert top.returncode == 0
    for command in ("init", "index", "search", "get", "status", "serve"):
        assert command in top.stdout
    search = mnemo("search", "--help")
    assert search.returncode == 0
    for option in (
        "--max-results",
        "--min-score",
        "--json",
        "--explain",
        "--provider",
        "--workspace",
        "query",
    ):
        assert option in search.stdout, option


def test_help_is_wrapped_to_the_terminal_width() -> None:
    """argparse's width (COLUMNS, else the terminal, else 80; less 2), read without shutil."""
    for columns, longest in (("50", 48), ("120", 118)):
        env = {**os.environ, "COLUMNS": columns}
        for argv in (["search", "--help"], ["policy", "--help"]):  # reflowed (not raw) help
            done = subprocess.run(
                [sys.executable, "-m", "mnemo", *argv], capture_output=True, text=True, env=env, timeout=120
            )
            assert done.returncode == 0, done.stderr
            # (a usage line may hold one option group wider than the width: argparse never breaks it)
            widths = [len(line) for line in done.stdout.splitlines() if not line.strip().startswith("[")]
            assert max(widths) <= longest, (argv, columns, max(widths))
            if argv[0] == "search":  # its options' help is long enough to use the room
                assert max(widths) > (80 if columns == "120" else 40), (argv, columns, max(widths))


def test_init_index_search_get(tmp_path: Path) -> None:
    ws = tmp_path / "notes"
    init = mnemo("init", str(ws))
    assert init.returncode == 0, init.stderr
    assert (ws / "MEMORY.md").is_file() and (ws / "mnemo.toml").is_file()
    memory_before = (ws / "MEMORY.md").read_bytes()
    # init never overwrites.
    (ws / "MEMORY.md").write_text("# Mine\n\n- The billing service uses PostgreSQL.\n", encoding="utf-8")
    assert mnemo("init", str(ws)).returncode == 0
    assert (ws / "MEMORY.md").read_bytes() != memory_before

    index = mnemo("index", "--provider", "none", "-w", str(ws))
    assert index.returncode == 0, index.stderr
    assert "full rebuild" in index.stdout

    search = mnemo("search", "--json", "--provider", "none", "-w", str(ws), "PostgreSQL")
    assert search.returncode == 0, search.stderr
    outcome = json.loads(search.stdout)
    assert outcome["mode"] == "keyword"
    paths = [r["path"] for r in outcome["results"]]
    assert "memory/2026-11-02.md" in paths  # the template's dated note
    assert paths[0] == "MEMORY.md"
    first = outcome["results"][0]
    assert first["citation"].startswith("MEMORY.md#L") and "parts" in first

    explain = mnemo("search", "--explain", "--provider", "none", "-w", str(ws), "PostgreSQL")
    assert explain.returncode == 0 and "bm25" in explain.stdout and "MEMORY.md#L" in explain.stdout

    got = mnemo("get", "-w", str(ws), "--json", "memory/2026-11-02.md")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["path"] == "memory/2026-11-02.md"

    # status has no --provider: the workspace's own setting decides which index it opens.
    toml = ws / "mnemo.toml"
    text = toml.read_text(encoding="utf-8")
    assert text.index('# provider = "auto"') < text.index("[agent]")  # the first one is [embedding]'s
    toml.write_text(text.replace('# provider = "auto"', 'provider = "none"', 1), encoding="utf-8")
    status = mnemo("status", "--json", "-w", str(ws))
    assert status.returncode == 0, status.stderr
    st = json.loads(status.stdout)
    assert st["files"] == 4 and st["chunks"] > 0 and st["mode"] == "keyword"


def test_get_bad_path_exits_1(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    for path, message in [("../etc/passwd.md", "'..' is not allowed")]:
        result = mnemo("get", "-w", str(tmp_path), path)
        assert result.returncode == 1
        assert result.stdout == ""
        assert result.stderr.startswith("mnemo: ") and message in result.stderr
        assert "Traceback" not in result.stderr


def _keyword_workspace(root: Path) -> Path:
    (root / "memory").mkdir(parents=True)
    (root / "mnemo.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    (root / "MEMORY.md").write_text("# Facts\n\nThe billing database is PostgreSQL.\n", encoding="utf-8")
    return root


def test_a_pipe_named_like_a_note_is_skipped_not_waited_on(tmp_path: Path) -> None:
    """A FIFO at memory/pipe.md blocked `mnemo index` and `mnemo search` (and a server's sync, holding
    the writer) forever, waiting for a writer to open the pipe."""
    ws = _keyword_workspace(tmp_path / "ws")
    os.mkfifo(ws / "memory" / "pipe.md")
    indexed = mnemo("index", "-w", str(ws))  # (timeout: 120 s)
    assert indexed.returncode == 0, indexed.stderr
    assert "indexed 1 changed file(s) of 1" in indexed.stdout
    found = mnemo("search", "-w", str(ws), "billing database")
    assert found.returncode == 0 and "MEMORY.md" in found.stdout


def test_a_read_only_workspace_is_searched_as_indexed_and_said_so(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """A note changed in a read-only workspace: the search's sync could not open the index for writing,
    took that for damage, tried to repair and rebuild it and ended in an OSError traceback. (Tests run
    as root, whom mode bits do not stop: DuckDB's answer on a read-only mount is played here.)"""
    from mnemo.cli.main import main
    from mnemo.index import opening
    from mnemo.index.duckdb_native import duckdb

    ws = _keyword_workspace(tmp_path / "ws")
    assert mnemo("index", "-w", str(ws)).returncode == 0
    with (ws / "MEMORY.md").open("a", encoding="utf-8") as f:
        f.write("- Giraffes sleep standing up.\n")

    def read_only(path: Path, **_: Any) -> Any:
        raise duckdb.IOException(f'IO Error: Cannot open file "{path}": Read-only file system')

    monkeypatch.setattr(opening, "connect", read_only)
    assert main(["search", "-w", str(ws), "billing database"]) == 0
    out, err = capsys.readouterr()
    assert (
        "MEMORY.md" in out
        and "cannot be opened for writing" in err
        and "recent changes may be missing" in err
    )
    assert main(["index", "-w", str(ws)]) == 1
    assert "Read-only file system" in capsys.readouterr().err
    assert not list((ws / ".mnemo").glob("*.building*")) and not list((ws / ".mnemo").glob("*.repairing*"))


def test_output_cut_short_by_its_reader_is_no_traceback(tmp_path: Path) -> None:
    """`mnemo search ... | head`: the reader closes the pipe; the command ends quietly, as a shell's
    commands do on SIGPIPE (status 141), not with a BrokenPipeError traceback."""
    ws = _keyword_workspace(tmp_path / "ws")
    assert mnemo("index", "-w", str(ws)).returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "search", "-w", str(ws), "billing database"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before it prints anything (it takes far longer than this to start)
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == "", err


def test_bad_config_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# M\n\nhello\n", encoding="utf-8")
    (tmp_path / "mnemo.toml").write_text("[search]\nmin_score = 7\n", encoding="utf-8")
    result = mnemo("get", "-w", str(tmp_path), "MEMORY.md")
    assert result.returncode == 0
    assert "search.min_score" in result.stderr
    assert result.stdout.strip().endswith("hello")


def test_get_and_log_accept_the_citations_search_prints(tmp_path: Path) -> None:
    ws = tmp_path / "notes"
    assert mnemo("init", str(ws)).returncode == 0
    note = "memory/2026-11-02.md"
    lines = (ws / note).read_text(encoding="utf-8").splitlines()
    for cited, want in [
        (f"{note}#L3-L5", lines[2:5]),
        (f"{note}#L4", lines[3:4]),
        (f"{note}:9", lines[8:9]),
        (f"{note}:8-10", lines[7:10]),
    ]:
        got = mnemo("get", "-w", str(ws), cited)
        assert got.returncode == 0, (cited, got.stderr)
        assert got.stdout.rstrip("\n").split("\n") == want, cited
    # explicit --from / --lines replace the citation's start / length; the JSON says what was read
    got = mnemo("get", "-w", str(ws), "--json", "--lines", "2", f"{note}#L3-L9")
    assert got.returncode == 0, got.stderr
    assert {k: json.loads(got.stdout)[k] for k in ("path", "from", "lines")} == {
        "path": note,
        "from": 3,
        "lines": 2,
    }
    for bad, message in [(f"{note}#L9-L3", "before it starts"), (f"{note}#L0", "between 1 and")]:
        refused = mnemo("get", "-w", str(ws), bad)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr

    env = {
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    committed = subprocess.run(
        [sys.executable, "-m", "mnemo", "commit", "--init", "-w", str(ws), "-m", "first"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert committed.returncode == 0, committed.stderr
    for cited in ("MEMORY.md#L19", "MEMORY.md:19", "MEMORY.md#L18-L19"):
        log = mnemo("log", "-w", str(ws), cited)
        assert log.returncode == 0, (cited, log.stderr)
        assert log.stdout.count("\n") == 1 and ": first" in log.stdout, log.stdout
    assert "history of line 18" in mnemo("log", "-w", str(ws), "MEMORY.md#L18-L19").stderr
    # a range that ends before it starts is a usage error, before Git runs
    assert mnemo("log", "-w", str(ws), "MEMORY.md#L19-L3").returncode == 2
    bad_line = mnemo("log", "-w", str(ws), "--line", "0", "MEMORY.md")
    assert bad_line.returncode == 2 and "--line is 1-based" in bad_line.stderr, bad_line.stderr


def test_search_explain_shows_weights_boost_and_sources(tmp_path: Path) -> None:
    ws = tmp_path / "notes"
    assert mnemo("init", str(ws)).returncode == 0
    assert mnemo("index", "--provider", "none", "-w", str(ws)).returncode == 0
    explain = mnemo("search", "--explain", "--provider", "none", "-w", str(ws), "PostgreSQL billing")
    assert explain.returncode == 0, explain.stderr
    out = explain.stdout
    assert "weights: text only" in out and "cut-off relative" in out and "MMR" in out, out
    memory_hit = out[out.index("MEMORY.md#L") :]
    assert "why: MEMORY.md +0.0" in memory_hit.split("\n\n")[0], out  # the bounded MEMORY.md boost
    assert "answering line: L" in memory_hit.split("\n\n")[0], out  # the line updates and MMR compare
    only_skills = mnemo(
        "search",
        "--json",
        "--provider",
        "none",
        "--sources",
        "skills",
        "-w",
        str(ws),
        "summary bullet points",
    )
    assert only_skills.returncode == 0, only_skills.stderr
    found = json.loads(only_skills.stdout)["results"]
    assert found and {r["source"] for r in found} == {"skills"}
    bad = mnemo("search", "--provider", "none", "--sources", "mail", "-w", str(ws), "x")
    assert bad.returncode == 2 and "memory, skills, sessions" in bad.stderr


def test_explain_layout_names_every_reason_and_the_weights_used(capsys: Any) -> None:
    from mnemo.cli.printing import print_results as _print_results

    parts = {
        "vector": 0.41,
        "text": 0.2,
        "bm25": 1.5,
        "decay": 0.75,
        "weight": 1.5,
        "score": 0.52,
        "mmrRank": 2,
        "ageDays": 40.0,
        "superseded": True,
        "boost": 0.03,
        "evidence": True,
        "reasons": [
            "superseded by memory/2026-11-12.md#L4",
            "similar to #1 (overlap 0.61)",
            "MEMORY.md +0.030",
        ],
    }
    hit = {
        "citation": "memory/a.md#L3-L9",
        "score": 0.52,
        "heading": "A > B",
        "snippet": "- text",
        "parts": parts,
    }
    weak = {**hit, "citation": "sessions/s.jsonl#L2-L2", "parts": {**parts, "reasons": [], "evidence": False}}
    outcome = {
        "mode": "hybrid",
        "provider": "local",
        "model": "m",
        "notes": [],
        "results": [hit, weak],
        "weights": {
            "vector": 0.2,
            "text": 0.8,
            "cjkVectorWeight": True,
            "vectorEvidence": False,
            "decay": "supersede",
            "halfLifeDays": 30,
            "mmr": 0.7,
            "memoryWeight": 1.5,
            "cut": "relative 0.5",
            "newKnob": 3,
        },
    }
    _print_results(outcome, explain=True)
    out = capsys.readouterr().out
    assert (
        "weights: vector 0.20 + text 0.80 (CJK query: vector weight lowered; vectors not counted as evidence)"
        in out
    )
    for part in (
        "decay supersede (half-life 30 days)",
        "MMR lambda 0.7",
        "MEMORY.md x1.5",
        "cut-off relative 0.5",
        "newKnob 3",
    ):
        assert part in out, part
    assert "weight 1.5 (+0.030)" in out and "40 days, superseded" in out
    assert "why: superseded by memory/2026-11-12.md#L4; similar to #1 (overlap 0.61); MEMORY.md +0.030" in out
    assert "why: no real keyword or vector evidence" in out
    _print_results(outcome, explain=False)
    assert "why:" not in capsys.readouterr().out


def test_a_citation_fetches_its_lines_whatever_separators_a_line_holds(tmp_path: Path) -> None:
    """A form feed, NEL or U+2028 ends a line for ``str.splitlines`` but not for the chunker or an
    editor: `get` of a citation search printed gave other lines, and `--explain` an answering line
    outside its chunk."""
    ws = _keyword_workspace(tmp_path / "ws")
    note = "# LS\n\n- delta line with\u2028separator inside\n- echo line with\x0cformfeed\n- foxtrot line\x85nel\n\n"
    (ws / "memory" / "ls.md").write_bytes((note + "## Later\n\n- golf target line\n").encode())
    assert mnemo("index", "-w", str(ws)).returncode == 0
    found = json.loads(mnemo("search", "--json", "-w", str(ws), "golf").stdout)
    hit = found["results"][0]
    assert hit["path"] == "memory/ls.md"
    fetched = mnemo("get", "-w", str(ws), hit["citation"])
    assert fetched.returncode == 0 and "golf target line" in fetched.stdout, fetched.stdout
    whole = json.loads(mnemo("get", "--json", "-w", str(ws), "memory/ls.md").stdout)
    assert whole["totalLines"] == 9 and "\u2028separator" in whole["text"]
    explained = mnemo("search", "-w", str(ws), "--explain", "-k", "1", "foxtrot").stdout
    first = json.loads(mnemo("search", "--json", "-w", str(ws), "foxtrot").stdout)["results"][0]
    assert first["startLine"] <= 5 <= first["endLine"] and "answering line: L5" in explained, explained


def test_a_file_name_that_cannot_be_a_memory_path_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """A name whose bytes are not UTF-8 stopped every index build (DuckDB could not take it: nothing was
    indexed, MEMORY.md included); a backslash in a name was read as a folder, so `memory/a\\b.md` was
    indexed as `memory/a/b.md`, another file, and removed and added again at every sync; a newline cut
    the citation a search printed in two."""
    ws = _keyword_workspace(tmp_path / "ws")
    (ws / "memory" / "a").mkdir()
    (ws / "memory" / "a" / "b.md").write_text("# Nested\n\ntoknested here\n", encoding="utf-8")
    with open(os.fsencode(ws / "memory") + b"/bad\xff\xfename.md", "w", encoding="utf-8") as f:
        f.write("# Bad\n\ntokbad here\n")
    (ws / "memory" / "a\\b.md").write_text("# Backslash\n\ntokbs here\n", encoding="utf-8")
    (ws / "memory" / "new\nline.md").write_text("# Newline\n\ntoknl here\n", encoding="utf-8")
    (ws / "memory" / "caf\u00e9 \U0001f468\u200d\U0001f469.md").write_text(
        "# Fine\n\ntokfine\n", encoding="utf-8"
    )
    indexed = mnemo("index", "-w", str(ws))
    assert indexed.returncode == 0, indexed.stderr
    assert "indexed 3 changed file(s) of 3" in indexed.stdout  # (an emoji with a joiner is a fine name)
    assert "memory/bad\\xff\\xfename.md: not indexed: it is not valid UTF-8" in indexed.stderr
    assert "a\\b.md: not indexed: it holds a backslash" in indexed.stderr
    assert "line.md: not indexed: it holds a control character" in indexed.stderr
    assert "indexed 0 changed file(s) of 3, removed 0" in mnemo("index", "-w", str(ws)).stdout
    assert "MEMORY.md" in mnemo("search", "-w", str(ws), "billing database").stdout
    nested = mnemo("search", "--json", "-w", str(ws), "toknested")
    assert [hit["path"] for hit in json.loads(nested.stdout)["results"]] == ["memory/a/b.md"]
    assert json.loads(mnemo("search", "--json", "-w", str(ws), "tokbs").stdout)["results"] == []


@pytest.mark.parametrize("folder", [b"q?x", b"bad\xffroot"])
def test_a_workspace_folder_duckdb_cannot_open_is_a_clear_error(tmp_path: Path, folder: bytes) -> None:
    """DuckDB reads what follows a '?' in a path as options and cannot take bytes that are not UTF-8:
    `mnemo index` and `search` ended in a traceback. An [index] dir elsewhere works."""
    ws = Path(os.fsdecode(os.fsencode(tmp_path) + b"/" + folder))
    _keyword_workspace(ws)
    for command in (["index"], ["search", "billing"]):
        done = mnemo(*command, "-w", str(ws))
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "rename the folder, or set [index] dir" in done.stderr
    (ws / "mnemo.toml").write_text(
        f'[embedding]\nprovider = "none"\n[index]\ndir = "{tmp_path / "index"}"\n', encoding="utf-8"
    )
    if b"?" in folder:  # (a root that is not UTF-8 cannot be written into mnemo.toml's text)
        assert mnemo("index", "-w", str(ws)).returncode == 0
        assert "MEMORY.md" in mnemo("search", "-w", str(ws), "billing database").stdout


def test_a_note_named_with_a_date_that_is_none_is_said_so(tmp_path: Path) -> None:
    """memory/2026-02-30.md was silently an undated topic: never decayed, outside every since/until
    filter, and consolidation's most durable home for a fact; memory/2062-11-01.md silently the newest."""
    ws = _keyword_workspace(tmp_path / "ws")
    (ws / "memory" / "2026-02-30.md").write_text(
        "# Notes\n\nThe kiln fires on Thursdays.\n", encoding="utf-8"
    )
    (ws / "memory" / "2026-02-28.md").write_text("# Notes\n\nThe kiln was cleaned.\n", encoding="utf-8")
    # A year typed wrong: the newest note for 36 years. A plan for next week is not a problem.
    (ws / "memory" / "2062-11-01.md").write_text("# Notes\n\nThe kiln moved.\n", encoding="utf-8")
    soon = (date.today() + timedelta(days=7)).isoformat()
    (ws / "memory" / f"{soon}.md").write_text("# Plan\n\nFire the kiln.\n", encoding="utf-8")
    indexed = mnemo("index", "-w", str(ws))
    assert indexed.returncode == 0
    assert "2026-02-30, which is not a date" in indexed.stderr + indexed.stdout
    assert "dated 2062-11-01, in the future" in indexed.stderr
    assert "2026-02-28" not in indexed.stderr and soon not in indexed.stderr
    status = json.loads(mnemo("status", "--json", "-w", str(ws)).stdout)
    problems = sorted(p["path"] for p in status["fileProblems"])
    assert problems == ["memory/2026-02-30.md", "memory/2062-11-01.md"], status
    assert "kiln" in mnemo("search", "-w", str(ws), "kiln Thursdays").stdout  # (indexed all the same)

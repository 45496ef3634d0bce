"""The command line, run as a real process (``python -m mnemo``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


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
    assert '# provider = "local"' in text
    toml.write_text(text.replace('# provider = "local"', 'provider = "none"'), encoding="utf-8")
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


def test_bad_config_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# M\n\nhello\n", encoding="utf-8")
    (tmp_path / "mnemo.toml").write_text("[search]\nmin_score = 7\n", encoding="utf-8")
    result = mnemo("get", "-w", str(tmp_path), "MEMORY.md")
    assert result.returncode == 0
    assert "search.min_score" in result.stderr
    assert result.stdout.strip().endswith("hello")

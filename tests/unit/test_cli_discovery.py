"""Workspace discovery on the command line: upward from the current folder, like Git; never a new folder.

Every command runs in a real process with its current folder set; ``MNEMO_CEILING_DIRECTORIES`` stops
the walk at the test's temporary folder, so a workspace somewhere above it cannot leak into the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SEVERAL = """
import contextlib, io, json, sys
from mnemo.cli.main import main
out = []
for argv in json.loads(sys.argv[1]):
    err, stdout = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(stdout):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:  # reported per command; the others still run
            code = repr(exc)
    out.append([argv, code, err.getvalue(), stdout.getvalue()])
print(json.dumps(out))
"""

COMMANDS = [
    ["search", "billing"],
    ["search", "--no-sync", "--provider", "none", "billing"],
    ["index", "--provider", "none"],
    ["get", "MEMORY.md"],
    ["status"],
    ["chat", "-m", "hello"],
    ["flush", "--session", "s1"],
    ["commit", "-m", "notes"],
    ["log", "MEMORY.md"],
    ["policy", "check", "ls"],
    ["exec", "ls", "--yes"],
    ["audit", "verify"],
    ["audit", "show"],
    ["gateway", "--check"],
]


def _env(ceiling: Path) -> dict[str, str]:
    return {
        **os.environ,
        "MNEMO_CEILING_DIRECTORIES": str(ceiling),
        "XDG_DATA_HOME": str(ceiling / "data"),
        "XDG_STATE_HOME": str(ceiling / "state"),
    }


def run_several(commands: list[list[str]], cwd: Path, ceiling: Path) -> list[list]:  # type: ignore[type-arg]
    done = subprocess.run(
        [sys.executable, "-c", SEVERAL, json.dumps(commands)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(ceiling),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def mnemo(*args: str, cwd: Path, ceiling: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mnemo", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(ceiling),
        timeout=120,
    )


def test_outside_a_workspace_every_command_refuses_and_creates_nothing(tmp_path: Path) -> None:
    here = tmp_path / "somewhere"
    here.mkdir()
    for argv, code, err, out in run_several(COMMANDS, here, tmp_path):
        assert code == 2, (argv, code, err, out)
        assert "no mnemo workspace" in err and "mnemo init PATH" in err, (argv, err)
        assert "--init" not in err and "OK" not in out and "no results" not in out, (argv, err, out)
        assert "Traceback" not in err
    assert list(here.iterdir()) == [], "nothing may be created in a folder that is not a workspace"


def test_search_outside_a_workspace_as_reported(tmp_path: Path) -> None:
    """The report: `mnemo search billing` printed "no results" and created .mnemo/ and sessions/."""
    here = tmp_path / "somewhere"
    here.mkdir()
    done = mnemo("search", "billing", cwd=here, ceiling=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("mnemo: no mnemo workspace in ") and "mnemo init PATH" in done.stderr
    assert list(here.iterdir()) == []


def test_commands_find_the_workspace_from_a_subfolder(tmp_path: Path) -> None:
    ws = tmp_path / "notes"
    deep = ws / "memory" / "projects"
    deep.mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The billing service uses PostgreSQL.\n", encoding="utf-8")
    (ws / "mnemo.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    results = run_several(
        [["get", "MEMORY.md"], ["audit", "verify"], ["policy", "check", "ls"]], deep, tmp_path
    )
    (get_code, get_err, get_out), (audit_code, _, audit_out), (_, check_err, check_out) = [
        r[1:] for r in results
    ]
    assert get_code == 0 and "PostgreSQL" in get_out, get_err
    assert audit_code == 0 and str(ws.resolve()) in audit_out
    assert check_out.split("\t")[0] in ("allow", "confirm", "deny"), check_err  # its exit code: policy's
    searched = mnemo("search", "--json", "billing", cwd=deep, ceiling=tmp_path)
    assert searched.returncode == 0, searched.stderr
    assert [r["path"] for r in json.loads(searched.stdout)["results"]] == ["MEMORY.md"]
    assert (ws / ".mnemo").is_dir(), "the index lives in the workspace found"
    assert sorted(p.name for p in deep.iterdir()) == [], "nothing is created in the current folder"


def test_workspace_option_wins_over_discovery(tmp_path: Path) -> None:
    here, other = tmp_path / "here", tmp_path / "other"
    here.mkdir()
    other.mkdir()
    (here / "MEMORY.md").write_text("# Memory\n\nhere\n", encoding="utf-8")
    (other / "MEMORY.md").write_text("# Memory\n\nother\n", encoding="utf-8")
    done = mnemo("get", "-w", str(other), "MEMORY.md", cwd=here, ceiling=tmp_path)
    assert done.returncode == 0 and done.stdout.strip().endswith("other"), done.stderr
    missing = mnemo("status", "-w", str(tmp_path / "missing"), cwd=here, ceiling=tmp_path)
    assert missing.returncode == 2 and "mnemo init" in missing.stderr
    assert not (tmp_path / "missing").exists()


def test_init_still_creates(tmp_path: Path) -> None:
    here = tmp_path / "fresh"
    here.mkdir()
    done = mnemo("init", ".", cwd=here, ceiling=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (here / "MEMORY.md").is_file() and (here / "mnemo.toml").is_file()

"""``mnemo policy check``, ``mnemo exec``, ``mnemo audit verify|show`` as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.sandbox_support import bwrap_works as _bwrap_works


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def mnemo(ws: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(ws.parent / "data")}  # the audit key, outside the workspace
    return subprocess.run(
        [sys.executable, "-m", "mnemo", *args, "--workspace", str(ws)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_policy_check_prints_decision_and_rule(ws: Path) -> None:
    denied = mnemo(ws, "policy", "check", "rm -rf /")
    assert denied.returncode == 1  # exit codes: 0 allow, 1 deny, 3 confirm
    assert denied.stdout.split("\t")[:2] == ["deny", "builtin:outside-workspace"]
    (ws / "mnemo.toml").write_text(
        '[[policy.rules]]\ntool = "exec"\npattern = "git status*"\ndecision = "allow"\n', encoding="utf-8"
    )
    checked = mnemo(ws, "policy", "check", "git status --short", "--json")
    allowed = json.loads(checked.stdout)
    assert allowed["decision"] == "allow" and allowed["rule"] == "config:rules[0]"
    assert checked.returncode == 0
    path = mnemo(ws, "policy", "check", "--tool", "write_file", "mnemo.toml")
    assert path.stdout.startswith("deny\tbuiltin:persistence") and path.returncode == 1


def test_policy_check_exit_codes_are_documented(ws: Path) -> None:
    confirmed = mnemo(ws, "policy", "check", "python3 -c 'print(1)'")
    assert confirmed.stdout.startswith("confirm\t") and confirmed.returncode == 3
    denied = mnemo(ws, "policy", "check", ": > mnemo.toml", "--json")
    assert json.loads(denied.stdout)["decision"] == "deny" and denied.returncode == 1
    helped = subprocess.run(
        [sys.executable, "-m", "mnemo", "policy", "check", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "0 allow, 1 deny, 3 confirm" in helped.stdout


@pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap unavailable: apt-get install bubblewrap")
def test_exec_yes_runs_a_benign_command_and_audits_it(ws: Path) -> None:
    ran = mnemo(ws, "exec", "echo hello from the sandbox > out.txt; cat out.txt", "--yes")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "hello from the sandbox\n"
    assert "approved by --yes" in ran.stderr
    refused = mnemo(ws, "exec", "rm -rf ~", "--yes")  # --yes never approves deny-level commands
    assert refused.returncode == 1 and "refused by policy (builtin:" in refused.stderr
    denied = mnemo(ws, "exec", "touch x", stdin="d\n")
    assert denied.returncode == 1 and "denied" in denied.stderr and not (ws / "x").exists()
    shown = mnemo(ws, "audit", "show", "-n", "100", "--json")
    entries = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [e["kind"] for e in entries].count("approval") == 2
    assert mnemo(ws, "audit", "verify").returncode == 0


def test_audit_verify_names_the_edited_entry(ws: Path) -> None:
    for _ in range(3):
        mnemo(ws, "exec", "touch x", stdin="d\n")
    ok = mnemo(ws, "audit", "verify")
    assert ok.returncode == 0 and "12 entries" in ok.stdout
    log = ws / ".mnemo" / "audit.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[6] = lines[6].replace('"choice":"deny"', '"choice":"allow_once"')
    log.write_text("".join(lines), encoding="utf-8")
    tampered = mnemo(ws, "audit", "verify")
    assert tampered.returncode == 1
    assert "TAMPERED" in tampered.stdout and "line 7 (seq 6): edited" in tampered.stdout
    log.unlink()
    gone = mnemo(ws, "audit", "verify")
    assert gone.returncode == 1 and "missing" in gone.stdout

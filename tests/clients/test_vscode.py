"""The VS Code extension (clients/vscode): static checks, unit tests, and end to end in a real VS Code.

- ``tsc --noEmit``, ``npm run lint`` (eslint, flat config) and ``npm test`` (node:test unit tests of the
  webview/extension message handling) run when clients/vscode/node_modules exists (``npm ci`` there).
- The end-to-end run (clients/vscode/scripts/e2e.sh: code-server with the packaged VSIX, driven by
  playwright-core in Debian's Chromium, against the real ``mnemo serve`` on a copy of workspace-template)
  runs when its tools are installed (``clients/vscode/scripts/e2e-setup.sh``: Node 24 and code-server in
  ~/.cache/mnemo-e2e, /usr/bin/chromium) and is skipped with the missing tool named otherwise. Each of its
  steps is one test below; a step whose server method has not landed is skipped with that reason.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "clients" / "vscode"
CACHE = Path(os.environ.get("MNEMO_E2E_CACHE", Path.home() / ".cache" / "mnemo-e2e"))
NODE24 = CACHE / "node-v24" / "bin" / "node"
CODE_SERVER = CACHE / "code-server" / "node_modules" / ".bin" / "code-server"
CHROMIUM = Path(os.environ.get("MNEMO_E2E_CHROMIUM", "/usr/bin/chromium"))
MNEMO = Path(sys.executable).parent / "mnemo"
E2E_TIMEOUT_S = 600
"""The whole run (~45 s alone; several minutes on a loaded machine). Its tests' pytest-timeout is longer:
the module fixture runs during the first test's setup, under that test's limit."""

STEPS = [
    "extension starts and the index is ready",
    "search memory opens the hit at its lines",
    "hover shows a retrieval score",
    "a planted secret is flagged and the redact action fixes it",
    "chat streams an answer whose citation opens the right lines",
    "an approval card approves a sandboxed command and its output comes back",
    "commit memory appears in git log",
]


def _npm() -> str | None:
    """npm from PATH, else the cached Node 24's."""
    found = shutil.which("npm")
    if found:
        return found
    cached = NODE24.parent / "npm"
    return str(cached) if cached.exists() else None


NPM = _npm()
needs_node_modules = pytest.mark.skipif(
    NPM is None or not (EXT / "node_modules").is_dir(),
    reason="clients/vscode/node_modules missing (run `npm ci` in clients/vscode) or npm not found",
)


def _npm_run(script: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    assert NPM is not None
    env = dict(os.environ)
    if shutil.which("node") is None:
        env["PATH"] = f"{NODE24.parent}:{env.get('PATH', '')}"
    return subprocess.run(
        [NPM, "run", "--silent", script], cwd=EXT, capture_output=True, text=True, timeout=timeout, env=env
    )


@needs_node_modules
@pytest.mark.parametrize("script", ["typecheck", "lint", "test"])
def test_static_and_unit(script: str) -> None:
    result = _npm_run(script)
    assert result.returncode == 0, f"npm run {script} failed:\n{result.stdout}\n{result.stderr}"


def _e2e_missing() -> str | None:
    if NPM is None or not (EXT / "node_modules" / "playwright-core").is_dir():
        return "clients/vscode/node_modules missing (npm ci in clients/vscode)"
    for path, what in [
        (NODE24, "Node 24"),
        (CODE_SERVER, "code-server"),
        (CHROMIUM, "Chromium"),
    ]:
        if not path.exists():
            return f"{what} not installed ({path}); run clients/vscode/scripts/e2e-setup.sh"
    if not MNEMO.exists():
        return f"mnemo not installed next to {sys.executable} (make install)"
    return None


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """End e2e.sh and everything it started: SIGTERM first (its EXIT trap stops code-server's own
    process group), SIGKILL to what is left."""
    for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _run_e2e(env: dict[str, str]) -> tuple[int, str]:
    """Run e2e.sh in its own session; a timeout (its own or pytest-timeout's) leaves no process behind,
    and its own timeout fails with what the run printed so far."""
    proc = subprocess.Popen(
        ["bash", str(EXT / "scripts" / "e2e.sh")],
        cwd=EXT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=E2E_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _stop_group(proc)
        output, _ = proc.communicate()
        pytest.fail(f"e2e.sh ran past {E2E_TIMEOUT_S} s; its output:\n{output[-6000:]}")
    except BaseException:
        _stop_group(proc)
        raise
    return proc.returncode, output


@pytest.fixture(scope="module")
def e2e_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    missing = _e2e_missing()
    if missing:
        pytest.skip(f"VS Code end to end: {missing}")
    shots = tmp_path_factory.mktemp("vscode-screenshots")
    env = dict(os.environ, MNEMO_BIN=str(MNEMO), MNEMO_E2E_SCREENSHOTS=str(shots))
    if shutil.which("node") is None:
        env["PATH"] = f"{NODE24.parent}:{env.get('PATH', '')}"
    returncode, output = _run_e2e(env)
    if returncode == 77:
        pytest.skip(output.strip().splitlines()[-1])
    report: dict[str, str] = {"__output__": output}
    for line in output.splitlines():
        m = re.match(r"^(ok|SKIP|FAIL)\s+(.+?)(?: \(\d+\.\d+s\))?(?::\s(.*))?$", line)
        if m:
            name = next((s for s in STEPS if m.group(2).startswith(s)), m.group(2))
            report[name] = f"{m.group(1)}: {m.group(3) or ''}"
    return report


@pytest.mark.timeout(E2E_TIMEOUT_S + 120)
@pytest.mark.parametrize("step", STEPS)
def test_vscode_e2e(e2e_report: dict[str, str], step: str) -> None:
    outcome = e2e_report.get(step)
    assert outcome is not None, f"step {step!r} did not report:\n{e2e_report['__output__'][-4000:]}"
    if outcome.startswith("SKIP"):
        pytest.skip(outcome)
    assert outcome.startswith("ok"), f"{step}: {outcome}\n{e2e_report['__output__'][-4000:]}"

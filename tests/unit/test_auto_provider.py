"""``[agent] provider = "auto"``: a loopback OpenAI-compatible server when one answers (probed fast,
remembered briefly), else ``model_path``, else the bundled model; and which one answers is told."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from tests.fake_chat_endpoint import Endpoint, chat_endpoint

from mnemo import wire
from mnemo.agent.providers import auto
from mnemo.agent.providers.base import ChatMessage
from mnemo.agent.providers.factory import BUNDLED_WINDOW, build_provider, describe, selection_of
from mnemo.agent.providers.local import LocalChatProvider
from mnemo.agent.providers.openai_compat import OpenAIChatProvider
from mnemo.config import AgentSettings, settings_from_dict


def port_of(url: str) -> int:
    port = httpx.URL(url).port
    assert port is not None
    return port


def dead_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(auto.PORTS_ENV, raising=False)
    monkeypatch.delenv(auto.PROBE_TIMEOUT_ENV, raising=False)
    auto.memo.clear()
    yield
    auto.memo.clear()


@pytest.fixture
def unhurried(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests that check *which* server is chosen, not how fast: the thread-served fake endpoint may
    take longer than 150 ms to answer on a loaded machine (seen once in CI: the bundled model chosen)."""
    monkeypatch.setattr(auto, "PROBE_TIMEOUT_S", 5.0)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with chat_endpoint(lambda _messages: ("PostgreSQL [MEMORY.md#L7-L7]", "stop")) as ep:
        yield ep


def test_auto_is_the_default_and_its_ports_are_settings() -> None:
    assert AgentSettings().provider == "auto"
    assert AgentSettings().auto_ports == [11434, 8080, 1234]
    settings, problems = settings_from_dict({"agent": {"auto_ports": [9], "repeat_penalty": 1.3}})
    assert not problems and settings.agent.auto_ports == [9] and settings.agent.repeat_penalty == 1.3
    _, problems = settings_from_dict({"agent": {"repeat_penalty": 0.5}})
    assert [p.key for p in problems] == ["agent.repeat_penalty"]


def test_auto_picks_a_loopback_server_and_says_so(
    endpoint: Endpoint, unhurried: None, tmp_path: Path
) -> None:
    settings = AgentSettings(auto_ports=[dead_port(), port_of(endpoint.url)])
    provider = build_provider(settings, tmp_path)
    assert isinstance(provider, OpenAIChatProvider)
    assert provider.endpoint == endpoint.url and provider.model == "scripted"  # the first model listed
    chosen = selection_of(provider)
    assert chosen is not None and chosen.kind == "server" and chosen.auto and not chosen.note
    assert (
        chosen.line()
        == f"chat model: scripted (an OpenAI-compatible server at {endpoint.url}, found on loopback)"
    )
    text = provider.stream([ChatMessage("user", "db?")], max_tokens=8, temperature=0.0).read()
    assert text == "PostgreSQL [MEMORY.md#L7-L7]"
    assert endpoint.requests[-1]["repeat_penalty"] == settings.repeat_penalty  # loopback: llama.cpp's penalty
    provider.close()


def test_a_configured_model_name_wins_over_the_listed_one(
    endpoint: Endpoint, unhurried: None, tmp_path: Path
) -> None:
    chosen = describe(AgentSettings(auto_ports=[port_of(endpoint.url)], model="qwen2.5:3b"), tmp_path)
    assert chosen.kind == "server" and chosen.model == "qwen2.5:3b"


def test_no_server_falls_back_to_the_bundled_model_and_says_it_is_a_demo(tmp_path: Path) -> None:
    provider = build_provider(AgentSettings(auto_ports=[dead_port()]), tmp_path)
    assert isinstance(provider, LocalChatProvider) and provider.pid is None  # nothing loaded
    chosen = selection_of(provider)
    assert chosen is not None and chosen.kind == "bundled" and chosen.auto
    assert "no loopback server answered" in chosen.line()
    assert "small demo model" in chosen.note and "README" in chosen.note
    assert provider._requested_window == BUNDLED_WINDOW  # sized to the model, not to its 8k training


def test_a_configured_gguf_comes_before_the_bundled_model(tmp_path: Path) -> None:
    chosen = describe(
        AgentSettings(auto_ports=[], model_path="/models/qwen2.5-3b-instruct-q4_k_m.gguf"), tmp_path
    )
    assert chosen.kind == "gguf" and chosen.model == "qwen2.5-3b-instruct-q4_k_m" and not chosen.note


def test_a_silent_port_costs_one_short_timeout_and_ports_are_probed_together(
    endpoint: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Probes of 2 s: one after another the three silent ports would cost 6 s, together ~2 s. With the
    # real 150 ms the bound had no margin on a loaded machine (0.96-1.13 s seen against 0.95 s, and the
    # thread-served endpoint itself may answer later than 150 ms there).
    monkeypatch.setattr(auto, "PROBE_TIMEOUT_S", 2.0)
    silent = [socket.socket() for _ in range(3)]  # accept connections (backlog), never answer
    try:
        for sock in silent:
            sock.bind(("127.0.0.1", 0))
            sock.listen(4)
        ports = [int(s.getsockname()[1]) for s in silent] + [port_of(endpoint.url)]
        t0 = time.perf_counter()
        chosen = describe(AgentSettings(auto_ports=ports), None)
        elapsed = time.perf_counter() - t0
    finally:
        for sock in silent:
            sock.close()
    assert chosen.kind == "server" and chosen.endpoint == endpoint.url
    assert elapsed < 2 * auto.PROBE_TIMEOUT_S, elapsed  # in parallel, not 3 x 2 s in a row


def test_the_probe_timeout_can_be_raised_for_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    assert auto.probe_timeout() == auto.PROBE_TIMEOUT_S == 0.15
    monkeypatch.setenv(auto.PROBE_TIMEOUT_ENV, "2.5")
    assert auto.probe_timeout() == 2.5
    for bad in ("0", "-1", "31", "soon", ""):
        monkeypatch.setenv(auto.PROBE_TIMEOUT_ENV, bad)
        assert auto.probe_timeout() == 0.15, bad


def test_the_answer_is_remembered_in_process_and_in_the_cache_dir(tmp_path: Path) -> None:
    with chat_endpoint(lambda _m: ("ok", "stop")) as ep:
        settings = AgentSettings(auto_ports=[port_of(ep.url)])
        assert describe(settings, tmp_path).kind == "server"
    # The server is gone: within the TTL the remembered answer stands (no probe), here and in a new process.
    assert describe(settings, tmp_path).kind == "server"
    auto.memo.clear()
    assert describe(settings, tmp_path).kind == "server"
    saved = json.loads((tmp_path / auto.CACHE_FILE).read_text(encoding="utf-8"))
    (entry,) = saved.values()
    entry["at"] -= auto.FOUND_TTL_S + 1  # expired: probed again, nothing answers
    (tmp_path / auto.CACHE_FILE).write_text(json.dumps(saved), encoding="utf-8")
    auto.memo.clear()
    assert describe(settings, tmp_path).kind == "bundled"


def test_the_env_var_overrides_the_ports(
    endpoint: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(auto.PORTS_ENV, "")
    assert describe(AgentSettings(auto_ports=[port_of(endpoint.url)]), None).kind == "bundled"
    monkeypatch.setenv(auto.PORTS_ENV, f" {port_of(endpoint.url)} ,x")
    assert describe(AgentSettings(auto_ports=[]), None).kind == "server"


def test_only_loopback_is_probed_and_only_with_a_get(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, str]] = []

    class Recorder(httpx.Client):
        def get(self, url: Any, **kwargs: Any) -> httpx.Response:
            seen.append(("GET", str(url)))
            raise httpx.ConnectError("refused")

    monkeypatch.setattr(auto.httpx, "Client", Recorder)
    assert auto.find_server([11434, 8080, 1234]) is None
    assert sorted(seen) == sorted(("GET", f"http://127.0.0.1:{p}/v1/models") for p in (11434, 8080, 1234))


def test_explicit_providers_are_not_probed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(auto, "find_server", lambda *a: pytest.fail("probed"))
    assert describe(AgentSettings(provider="local"), tmp_path).kind == "bundled"
    chosen = describe(AgentSettings(provider="anthropic", model="claude-x"), tmp_path)
    assert chosen.kind == "configured" and chosen.line() == "chat model: claude-x (anthropic)"


def test_repeat_penalty_never_goes_to_a_remote_api() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, text='data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n')

    for url in ("https://api.openai.com/v1", "http://localhost:8080/v1"):
        provider = OpenAIChatProvider(
            url, "m", transport=httpx.MockTransport(handler), repeat_penalty=1.2, frequency_penalty=0.3
        )
        assert provider.stream([ChatMessage("user", "x")], max_tokens=4, temperature=0).read() == "hi"
    remote, local = bodies[-2], bodies[-1]
    assert "repeat_penalty" not in remote and remote["frequency_penalty"] == 0.3
    assert local["repeat_penalty"] == 1.2 and "presence_penalty" not in local


def test_the_model_process_passes_the_penalties_to_llama_cpp() -> None:
    import io

    from mnemo.agent.providers.model_process import ModelServer

    seen: dict[str, Any] = {}

    class Chunks(list[dict[str, Any]]):
        def close(self) -> None:
            pass

    def complete(**kwargs: Any) -> Chunks:
        seen.update(kwargs)
        return Chunks([{"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}]}])

    server = ModelServer(io.StringIO(), threading.Event())
    server._llm = SimpleNamespace(create_chat_completion=complete)
    server.handle(
        {"op": "generate", "messages": [], "max_tokens": 4, "temperature": 0.2, "repeat_penalty": 1.3,
         "frequency_penalty": 0.1}
    )  # fmt: skip
    assert (
        seen["repeat_penalty"] == 1.3 and seen["frequency_penalty"] == 0.1 and seen["presence_penalty"] == 0.0
    )


def test_lsp_status_says_which_chat_model_answers(endpoint: Endpoint, unhurried: None) -> None:
    from mnemo.services import Services  # what the mnemo/status handler calls

    settings = SimpleNamespace(agent=AgentSettings(auto_ports=[port_of(endpoint.url)]))
    index = object()
    core = SimpleNamespace(memory=SimpleNamespace(status=lambda: index), settings=settings)
    result = Services.status(core)  # type: ignore[arg-type]
    assert result.index is index and result.chat_model is not None
    chat = wire.chat_model(result.chat_model)  # mnemo/status's "chatModel"
    assert chat is not None and chat["kind"] == "server" and chat["model"] == "scripted"
    assert chat["line"].startswith("chat model: scripted (")


# -- the CLI ----------------------------------------------------------------------------------------
def mnemo_chat(ws: Path, ports: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **__import__("os").environ,
        auto.PORTS_ENV: ports,
        auto.PROBE_TIMEOUT_ENV: "5",  # the thread-served endpoint may answer late on a loaded machine
        "MNEMO_CACHE_DIR": str(ws.parent / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-m", "mnemo", "chat", "--no-sync", "-m", "Which database does billing use?",
         "-w", str(ws), *extra],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip


def test_mnemo_chat_uses_a_loopback_server_without_configuration(
    make_workspace: Callable[..., Path], sample_notes: dict[str, Any], endpoint: Endpoint
) -> None:
    ws = make_workspace(sample_notes, toml='[embedding]\nprovider = "none"\n')  # no [agent] at all
    done = mnemo_chat(ws, str(port_of(endpoint.url)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "PostgreSQL [MEMORY.md#L7-L7]"
    assert (
        f"chat model: scripted (an OpenAI-compatible server at {endpoint.url}, found on loopback)"
        in done.stderr
    )
    assert "demo model" not in done.stderr
    assert endpoint.requests, "the reply came from the loopback server"


@pytest.mark.model
def test_mnemo_chat_falls_back_to_the_bundled_model_and_says_so(
    make_workspace: Callable[..., Path], sample_notes: dict[str, Any]
) -> None:
    toml = '[embedding]\nprovider = "none"\n\n[agent]\nmax_tokens = 8\n'
    ws = make_workspace(sample_notes, toml=toml)
    done = mnemo_chat(ws, str(dead_port()))
    assert done.returncode == 0, done.stderr
    assert (
        "chat model: SmolLM2-135M-Instruct.Q4_1 (bundled, local llama.cpp; no loopback server answered)"
        in done.stderr
    )
    assert "note: a small demo model" in done.stderr

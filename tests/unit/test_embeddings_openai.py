"""The OpenAI-compatible provider against a real loopback HTTP server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from mnemo.config import EmbeddingSettings
from mnemo.embeddings import EmbeddingError, build_embedder
from mnemo.embeddings.openai_compat import OpenAIEmbedder

SECRET = "sk-test-0123456789abcdef"
DIMS = 8


def fake_vector(text: str) -> list[float]:
    """Deterministic, unnormalised vector for a text (length 2x to check re-normalisation)."""
    rng = np.random.default_rng(sum(text.encode()) + len(text))
    return (rng.normal(size=DIMS) * 2.0).tolist()


@dataclass
class Behaviour:
    fail_first: list[int] = field(default_factory=list)  # statuses answered before succeeding
    requests: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    reverse: bool = True  # answer items in reverse order to check re-ordering by index
    body: bytes | None = None  # a fixed (bad) body to answer with


@pytest.fixture
def server() -> Iterator[tuple[str, Behaviour]]:
    behaviour = Behaviour()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            payload = json.loads(self.rfile.read(length))
            behaviour.requests.append(payload)
            behaviour.auth.append(self.headers.get("Authorization"))
            behaviour.paths.append(self.path)
            if behaviour.fail_first:
                status = behaviour.fail_first.pop(0)
                self.send_response(status)
                self.send_header("Retry-After", "0")
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"error": "slow down"}')
                return
            if behaviour.body is not None:
                body = behaviour.body
            else:
                items = [
                    {"object": "embedding", "index": i, "embedding": fake_vector(text)}
                    for i, text in enumerate(payload["input"])
                ]
                if behaviour.reverse:
                    items.reverse()
                body = json.dumps({"object": "list", "data": items, "model": payload["model"]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", behaviour
    finally:
        httpd.shutdown()
        httpd.server_close()


def make(endpoint: str, monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> OpenAIEmbedder:
    monkeypatch.setenv("MNEMO_TEST_KEY", SECRET)
    settings = EmbeddingSettings(
        provider="openai",
        endpoint=endpoint,
        model="test-embed",
        api_key_env="MNEMO_TEST_KEY",
        batch_size=overrides.pop("batch_size", 3),
        timeout_s=5.0,
        max_retries=overrides.pop("max_retries", 4),
    )
    sleeps: list[float] = []
    embedder = OpenAIEmbedder(settings, sleep=sleeps.append, **overrides)
    embedder.sleeps = sleeps  # type: ignore[attr-defined]
    return embedder


def test_retries_429_then_succeeds_batches_and_sends_key(
    server: tuple[str, Behaviour], monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, behaviour = server
    behaviour.fail_first = [429, 503]
    embedder = make(endpoint, monkeypatch)
    texts = [f"text number {i}" for i in range(7)]
    vectors = embedder.embed(texts)
    embedder.close()

    assert vectors.shape == (7, DIMS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    for text, row in zip(texts, vectors, strict=True):
        expected = np.asarray(fake_vector(text), dtype=np.float32)
        np.testing.assert_allclose(row, expected / np.linalg.norm(expected), rtol=1e-5, atol=1e-6)
    # two failed attempts, then batches of 3, 3, 1
    assert [len(r["input"]) for r in behaviour.requests] == [3, 3, 3, 3, 1]
    assert all(r["model"] == "test-embed" for r in behaviour.requests)
    assert set(behaviour.paths) == {"/v1/embeddings"}
    assert behaviour.auth == [f"Bearer {SECRET}"] * 5
    assert len(embedder.sleeps) == 2  # type: ignore[attr-defined]
    assert embedder.dims == DIMS and len(behaviour.requests) == 5  # dims known: no extra request


def test_gives_up_after_max_retries_without_leaking_key(
    server: tuple[str, Behaviour], monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, behaviour = server
    behaviour.fail_first = [500] * 10
    embedder = make(endpoint, monkeypatch, max_retries=2)
    with pytest.raises(EmbeddingError) as info:
        embedder.embed(["a"])
    assert "HTTP 500" in str(info.value) and "3 attempts" in str(info.value)
    assert SECRET not in str(info.value)
    assert len(behaviour.requests) == 3
    delays = embedder.sleeps  # type: ignore[attr-defined]
    assert len(delays) == 2 and 0 < delays[0] <= delays[1] * 2


def test_client_error_is_not_retried(server: tuple[str, Behaviour], monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint, behaviour = server
    behaviour.fail_first = [401]
    embedder = make(endpoint, monkeypatch)
    with pytest.raises(EmbeddingError, match="HTTP 401"):
        embedder.embed(["a"])
    assert len(behaviour.requests) == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "not JSON"),
        (b'{"data": "x"}', "no 'data' list"),
        (b'{"data": []}', "0 embeddings for 1 inputs"),
        (b'{"data": [{"index": 0}]}', "no 'embedding' list"),
        (b'{"data": [{"index": 5, "embedding": [1, 2]}]}', "indices"),
        (b'{"data": [{"index": 0, "embedding": ["a", "b"]}]}', "not numbers"),
    ],
)
def test_bad_responses_raise_clear_errors(
    server: tuple[str, Behaviour], monkeypatch: pytest.MonkeyPatch, body: bytes, reason: str
) -> None:
    endpoint, behaviour = server
    behaviour.body = body
    embedder = make(endpoint, monkeypatch)
    with pytest.raises(EmbeddingError, match=reason):
        embedder.embed(["a"])


def test_connection_errors_are_retried_then_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as sock:  # a port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = make(f"http://127.0.0.1:{port}/v1", monkeypatch, max_retries=1)
    with pytest.raises(EmbeddingError, match="cannot reach") as info:
        embedder.embed(["a"])
    assert SECRET not in str(info.value)
    assert len(embedder.sleeps) == 1  # type: ignore[attr-defined]


def test_long_text_is_split_into_windows_and_averaged(
    server: tuple[str, Behaviour], monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, behaviour = server
    embedder = make(endpoint, monkeypatch, max_tokens=40)
    words = [f"w{i}" for i in range(100)]
    long_text = " ".join(words)
    vector = embedder.embed([long_text, "short"])
    sent = [t for r in behaviour.requests for t in r["input"]]
    pieces = sent[:-1]
    assert sent[-1] == "short"
    assert len(pieces) > 1 and " ".join(pieces).split() == words  # nothing dropped
    assert all(embedder.count_tokens(p) <= 30 for p in pieces)
    units = np.asarray([fake_vector(p) for p in pieces], dtype=np.float32)
    units /= np.linalg.norm(units, axis=1, keepdims=True)
    weights = np.asarray([embedder.count_tokens(p) for p in pieces], dtype=np.float32)
    mean = (units * weights[:, None]).sum(axis=0)
    np.testing.assert_allclose(vector[0], mean / np.linalg.norm(mean), rtol=1e-5, atol=1e-6)


def test_no_key_means_no_authorization_header(
    server: tuple[str, Behaviour], monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, behaviour = server
    monkeypatch.delenv("MNEMO_EMBEDDING_API_KEY", raising=False)
    embedder = build_embedder(EmbeddingSettings(provider="openai", endpoint=endpoint + "/"))
    assert embedder.provider == "openai"
    assert embedder.embed([]).shape[0] == 0 and behaviour.requests == []
    assert embedder.dims == DIMS  # probes the endpoint once
    assert behaviour.auth == [None]
    assert embedder.model == f"nomic-embed-text@{endpoint}"
    embedder.close()

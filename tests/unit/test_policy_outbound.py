"""The outbound secret filter, alone and in the OpenAI-compatible embeddings provider (real HTTP on loopback)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from mnemo.config import EmbeddingSettings
from mnemo.embeddings.openai_compat import OpenAIEmbedder
from mnemo.policy.outbound import redact_outbound

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
PASSWORD_URL = "postgres://billing:" + "Zq8kP2vLm9xR4twQ" + "@db.internal:5432/prod"


def test_redact_outbound_counts_and_replaces() -> None:
    text = f"deploy notes\ntoken {TOKEN}\ndb {PASSWORD_URL}\n"
    clean, count = redact_outbound(text)
    assert count == 2
    assert TOKEN not in clean and "Zq8kP2vLm9xR4twQ" not in clean
    assert "<redacted:github-pat>" in clean and clean.startswith("deploy notes\ntoken ")


def test_clean_text_is_untouched() -> None:
    text = "We chose PostgreSQL for billing; the hash is 9f86d081884c7d659a2feaa0c55ad015."
    assert redact_outbound(text) == (text, 0)
    assert redact_outbound("") == ("", 0)


class _Capture(BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).bodies.append(body)
        inputs = json.loads(body)["input"]
        answer = {"data": [{"index": i, "embedding": [1.0, 0.0, 0.5]} for i in range(len(inputs))]}
        raw = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Capture.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_planted_secret_never_reaches_the_provider(endpoint: str) -> None:
    settings = EmbeddingSettings(provider="openai", endpoint=endpoint, model="m", api_key_env="")
    embedder = OpenAIEmbedder(settings)
    try:
        vectors = embedder.embed([f"my github token is {TOKEN}", "plain note", f"db: {PASSWORD_URL}"])
    finally:
        embedder.close()
    assert vectors.shape == (3, 3)
    (body,) = _Capture.bodies
    assert TOKEN.encode() not in body and b"Zq8kP2vLm9xR4twQ" not in body
    sent = json.loads(body)["input"]
    assert sent[0] == "my github token is <redacted:github-pat>" and sent[1] == "plain note"


def test_an_invisible_character_inside_a_key_and_a_json_password_are_redacted() -> None:
    """A zero-width space, joiner or soft hyphen inside a key hid it from every rule (a model reads the key
    all the same), and a password in a JSON object ("password": "…"}) was missed: both reached a remote
    provider (a red-team review)."""
    from mnemo.policy.outbound import redact_outbound

    gh = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    aws = "AKIA" + "Z7XQ3RTU2VWY4ABC"
    for text in (
        f"token {gh[:10]}\u200b{gh[10:]}",
        f"token {gh[:10]}\u00ad{gh[10:]}",
        f"aws_access_key_id = {aws[:8]}\u200d{aws[8:]}",
        '{"password": "Tr0ub4dor&3xyzQ"}',
        '{"password":"Tr0ub4dor&3xyzQ"}',
    ):
        clean, count = redact_outbound(text)
        assert count == 1 and "<redacted:" in clean, (text, clean)
        assert not any(part in clean for part in ("A1b2C3d4", "RTU2VWY4", "Tr0ub4dor")), clean
    assert (
        redact_outbound("caf\u00e9 \u200bna\u00efve")[0] == "caf\u00e9 na\u00efve"
    )  # (only what shows nothing)

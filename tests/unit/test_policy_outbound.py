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


# --- Keys disguised on the way out: a truncated PEM block, percent-encoding, look-alike letters, wrapping.
# Each text below reached a remote provider with the key readable before these were closed (docs/security.md).

GH = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
ANT = (
    "sk-ant-api03-"
    + "Xq7Lm2Np9Rt4Vw6Yz8Bc1Df3Gh5Jk7Mn9Pq2Rs4Tu6Wx8Za1Cb3De5Fg7Hj9Kl2Mn4Pq6Rs8Tu1Vw3Xy5Za7Bc9De2Fg4"
    + "AA"
)  # 93 characters, then AA
PEM_BODY = [
    "MIIEowIBAAKCAQEAx7Lm2Np9Rt4Vw6Yz8Bc1Df3Gh5Jk7Mn9Pq2Rs4Tu6Wx8Za1C",
    "b3De5Fg7Hj9Kl2Mn4Pq6Rs8Tu1Vw3Xy5Za7Bc9De2Fg4Hi6Jk8Lm0No2Pq4Rs6T",
    "u8Vw0Xy2Za4Bc6De8Fg0Hi2Jk4Lm6No8Pq0Rs2Tu4Vw6Xy8Za0Bc2De4Fg6Hi8",
    "Jk0Lm2No4Pq6",
]


def _pct(value: str) -> str:
    return "".join(f"%{ord(ch):02X}" for ch in value)


def _assert_hidden(text: str, *fragments: str) -> str:
    clean, count = redact_outbound(text)
    assert count >= 1 and "<redacted:" in clean, (text, clean)
    for fragment in fragments:
        assert fragment not in clean, (fragment, clean)
    return clean


@pytest.mark.parametrize(
    "text",
    [
        "key file:\n-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n\nThe rest was cut off.\n",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(PEM_BODY[:2]),
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F2A\n\n"
        + "\n".join(PEM_BODY[:3]),
        '{"key": "-----BEGIN PRIVATE KEY-----\\n' + "\\n".join(PEM_BODY[:2]) + '"}',
    ],
)
def test_a_pem_private_key_with_no_end_line_is_redacted(text: str) -> None:
    clean = _assert_hidden(text, *(line[:20] for line in PEM_BODY if line in text))
    assert "PRIVATE KEY-----" not in clean
    if "The rest" in text:
        assert clean.startswith("key file:\n<redacted:") and clean.endswith("\n\nThe rest was cut off.\n")


@pytest.mark.parametrize(
    ("head", "key", "tail"),
    [
        ("fetch https://llm.internal.io/v1/models?stream=1&key=", ANT.replace("-", "%2D"), " daily"),
        ("see ", _pct(GH), " in the old script"),
        ("see ", GH.replace("_", "%5F"), " for CI"),
        ("see ", GH.replace("_", "%255F"), " (encoded twice)"),
    ],
)
def test_a_percent_encoded_key_is_redacted(head: str, key: str, tail: str) -> None:
    clean = _assert_hidden(head + key + tail, GH[4:14], GH[-10:], ANT[13:30], ANT[-20:], key[:24], key[-24:])
    assert clean.startswith(head) and clean.endswith(tail)


@pytest.mark.parametrize(
    "text",
    [
        "use gh\u0440_" + GH[4:] + " for CI",  # Cyrillic er
        "use " + GH[:10] + "\u043e" + GH[11:] + " for CI",  # Cyrillic o in place of a digit-free letter
        "aws \u0410KIA" + "Z7XQ3RTU2VWY4ABC" + " in prod",  # Cyrillic A
        "use " + GH.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)}) + " for CI",  # full-width
        "use " + GH[:6] + "\u03bf" + GH[7:] + " for CI",  # Greek omicron
    ],
)
def test_a_key_with_look_alike_letters_is_redacted(text: str) -> None:
    clean = _assert_hidden(text, GH[14:30], "RTU2VWY4", "\uff54\uff55")
    assert clean.startswith(text[:4]) and clean.endswith(text[-7:])


@pytest.mark.parametrize(
    "text",
    [
        "token " + GH[:20] + "\n" + GH[20:] + "\nnext line",
        "export GH=" + GH[:16] + "\\\n" + GH[16:] + "\n",
        "export GH=" + GH[:16] + "\\\r\n    " + GH[16:] + "\n",
        'gh = "' + GH[:18] + '" \\\n    "' + GH[18:] + '"',
        'gh = "' + GH[:18] + '" + "' + GH[18:] + '"',
        'const gh = "' + GH[:12] + " " + GH[12:] + '";',
    ],
)
def test_a_key_split_across_lines_or_strings_is_redacted(text: str) -> None:
    clean = _assert_hidden(text, GH[4:16], GH[22:])
    assert clean[:4] == text[:4]


@pytest.mark.parametrize(
    "text",
    [
        "Сегодня обсудили архитектуру: Python-скрипт читает API-ключ из переменной окружения, а не из файла.\n"
        "Встреча перенесена на 15:30, ответственный — Ольга. Версия 2.4.1 выйдет в пятницу.",
        "Η συνάντηση μετατέθηκε. Ο κωδικός έκδοσης είναι ΑΒΓ-2024 και το API είναι έτοιμο.",
        "Docs: https://example.org/search?q=secret%20rotation%20policy&page=2 and 100% done, 50%-off.",
        "See https://wiki.internal/Deploy%20Notes%20(2024)/Step%203%3A%20keys and file%2Fpath.",
        "-----BEGIN PUBLIC KEY-----\n" + "\n".join(PEM_BODY[:3]) + "\n-----END PUBLIC KEY-----\n",
        "-----BEGIN CERTIFICATE-----\n" + "\n".join(PEM_BODY) + "\n-----END CERTIFICATE-----\n",
        "A file that starts with `-----BEGIN RSA PRIVATE KEY-----` is a key; never commit one.\n"
        "-----BEGIN OPENSSH PRIVATE KEY-----\n(paste the key here)\n",
        "The configuration\nparameters for release 2024\nare in the wiki; build 7f3a9c2\nshipped on Monday.\n"
        "Run `make all` then\n  `make install` as usual.",
        'She said "the new version 3 works fine" and left.',
        "ｆｕｌｌ－ｗｉｄｔｈ ｔｉｔｌｅ ２０２４ and café naïve résumé.",
    ],
)
def test_ordinary_notes_pass_the_outbound_filter_untouched(text: str) -> None:
    assert redact_outbound(text) == (text, 0)


ANTHROPIC = "sk-ant-api03-" + ("aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5" * 3)[:93] + "AA"


@pytest.mark.parametrize("after", ["&stream=1", ")", "#top", ",next", "|", "]", ">"])
def test_a_key_in_a_url_query_or_a_markdown_link_is_redacted(after: str) -> None:
    # 148 of gitleaks' rules ended a key at a quote, a space or ";" only: `?key=...&stream=1` passed.
    text = f"[docs](https://api.example.com/v1?key={ANTHROPIC}{after}"
    clean, count = redact_outbound(text)
    assert (
        count == 1 and clean == f"[docs](https://api.example.com/v1?key=<redacted:anthropic-api-key>{after}"
    )

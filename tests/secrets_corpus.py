"""Generated Markdown memory notes with planted secrets (ground truth) and decoys.

``generate_corpus(seed, n_files)`` returns ``[(name, text, planted)]``; each ``Planted`` holds the
exact code-point offsets and line/column range of one planted secret value. Decoys (hashes, UUIDs,
placeholders, documented example keys, data: URIs, numbers, prose, paths) are not in ``planted``:
a scanner that flags them loses precision. Used by tests/unit/test_secrets.py and
benchmarks/bench_secrets.py.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"


@dataclass(frozen=True)
class Planted:
    kind: str
    value: str
    start: int
    end: int
    line: int
    start_col: int
    end_line: int
    end_col: int


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choices(alphabet, k=n))


def _mixed(rng: random.Random, alphabet: str, n: int) -> str:
    """Random value that surely holds an upper, a lower letter and a digit (as real keys do)."""
    body = [
        *_r(rng, alphabet, n - 3),
        rng.choice("ABCDEFGHJKMNPQRSTUVWXYZ"),
        rng.choice("abcdefghjkmnpqrstuvwxyz"),
        rng.choice("23456789"),
    ]
    rng.shuffle(body)
    return "".join(body)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _password(rng: random.Random) -> str:
    return _mixed(rng, ALNUM + "!#$%^&*-_+", rng.randint(10, 20))


def _url_password(rng: random.Random) -> str:
    return _mixed(rng, ALNUM, rng.randint(12, 24))


def _jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {
        "sub": str(rng.randint(10**6, 10**9)),
        "name": rng.choice(["ana", "bo", "kim"]),
        "iat": rng.randint(1_600_000_000, 1_800_000_000),
    }
    return f"{header}.{_b64url(json.dumps(claims).encode())}.{_mixed(rng, B64URL, 43)}"


def _pem(rng: random.Random, label: str) -> str:
    lead = "b3BlbnNzaC1rZXktdjEAAAAA" if label == "OPENSSH" else "MIIEow"
    body = lead + _r(rng, ALNUM + "+/", 64 * rng.randint(6, 14) - len(lead))
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return (
        f"-----BEGIN {label} PRIVATE KEY-----\n" + "\n".join(lines) + f"\n-----END {label} PRIVATE KEY-----"
    )


Maker = Callable[[random.Random], tuple[str, str, str]]  # -> (prefix, value, suffix) on one line


def _kinds() -> dict[str, Maker]:
    def tok(labels: list[str], value: Callable[[random.Random], str]) -> Maker:
        def make(rng: random.Random) -> tuple[str, str, str]:
            label = rng.choice(labels)
            v = value(rng)
            style = rng.randrange(4)
            if style == 0:
                return f"- {label}: `", v, "`"
            if style == 1:
                return f"{label.upper().replace(' ', '_')}=", v, ""
            if style == 2:
                return f"| {label} | ", v, " | rotated monthly |"
            return f"🔑 {label} → ", v, " (do not share)"

        return make

    def assign(keys: list[str], value: Callable[[random.Random], str]) -> Maker:
        def make(rng: random.Random) -> tuple[str, str, str]:
            key, v = rng.choice(keys), value(rng)
            style = rng.randrange(3)
            if style == 0:
                return f"{key}: ", v, ""
            if style == 1:
                return f'{key} = "', v, '"'
            return f"- **{key}**: `", v, "`"

        return make

    def url(scheme: str, port: int) -> Maker:
        def make(rng: random.Random) -> tuple[str, str, str]:
            user, host = (
                rng.choice(["app", "admin", "svc_rw"]),
                rng.choice(["db.internal", "10.0.3.7", "prod-db.example.net"]),
            )
            return f"- DSN: `{scheme}://{user}:", _url_password(rng), f"@{host}:{port}/main`"

        return make

    return {
        "aws-access-key": tok(
            ["aws access key id"], lambda g: "AKIA" + _r(g, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
        ),
        "aws-secret-key": assign(
            ["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"], lambda g: _mixed(g, ALNUM + "/+", 40)
        ),
        "github-pat": tok(["github token"], lambda g: "ghp_" + _mixed(g, ALNUM, 36)),
        "github-fine-grained": tok(
            ["gh pat"], lambda g: "github_pat_" + _mixed(g, ALNUM, 22) + "_" + _mixed(g, ALNUM, 59)
        ),
        "gitlab-pat": tok(["gitlab token"], lambda g: "glpat-" + _mixed(g, ALNUM + "-_", 20)),
        "slack-bot": tok(
            ["slack bot"],
            lambda g: f"xoxb-{_r(g, string.digits, 11)}-{_r(g, string.digits, 12)}-{_mixed(g, ALNUM, 24)}",
        ),
        "slack-webhook": tok(
            ["slack hook"],
            lambda g: (
                f"https://hooks.slack.com/services/T{_r(g, string.ascii_uppercase + string.digits, 10)}/B{_r(g, string.ascii_uppercase + string.digits, 10)}/{_mixed(g, ALNUM, 24)}"
            ),
        ),
        "stripe-live": tok(["stripe key"], lambda g: "sk_live_" + _mixed(g, ALNUM, g.randint(24, 40))),
        "openai": tok(
            ["openai key"], lambda g: "sk-proj-" + _mixed(g, B64URL, 74) + "T3BlbkFJ" + _mixed(g, B64URL, 74)
        ),
        "anthropic": tok(["anthropic key"], lambda g: "sk-ant-api03-" + _mixed(g, B64URL, 93) + "AA"),
        "google-api": tok(["maps key"], lambda g: "AIza" + _mixed(g, B64URL, 35)),
        "twilio": tok(["twilio api key"], lambda g: "SK" + _r(g, HEX, 32)),
        "sendgrid": tok(
            ["sendgrid key"], lambda g: "SG." + _mixed(g, B64URL, 22) + "." + _mixed(g, B64URL, 43)
        ),
        "npm": tok(["npm token"], lambda g: "npm_" + _mixed(g, ALNUM, 36)),
        "pypi": tok(["pypi token"], lambda g: "pypi-AgEIcHlwaS5vcmc" + _mixed(g, B64URL, 70)),
        "jwt": tok(["session jwt"], _jwt),
        "huggingface": tok(["hf token"], lambda g: "hf_" + _r(g, string.ascii_letters, 34)),
        "digitalocean": tok(["do token"], lambda g: "dop_v1_" + _r(g, HEX, 64)),
        "telegram": tok(
            ["telegram bot"], lambda g: f"{g.randint(10**8, 10**10 - 1)}:AA{_mixed(g, B64URL, 33)}"
        ),
        "discord": tok(
            ["discord bot"],
            lambda g: "MT" + _mixed(g, ALNUM, 22) + "." + _mixed(g, B64URL, 6) + "." + _mixed(g, B64URL, 38),
        ),
        "postgres-url": url("postgres", 5432),
        "mysql-url": url("mysql", 3306),
        "mongodb-url": url("mongodb+srv", 27017),
        "redis-url": url("redis", 6379),
        "password": assign(["password", "db_password", "Password", "admin passwd"], _password),
        "env-api-key": assign(
            ["API_KEY", "SERVICE_API_KEY", "APP_SECRET", "AUTH_TOKEN", "secret", "token"],
            lambda g: _mixed(g, ALNUM, g.randint(24, 40)),
        ),
        "azure-storage": lambda g: (
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=",
            _mixed(g, ALNUM + "+/", 86) + "==",
            ";EndpointSuffix=core.windows.net",
        ),
        "ado-password": lambda g: (
            "Server=tcp:sql.acme.net,1433;Database=crm;User ID=app;Password=",
            _password(g).replace(";", "x"),
            ";Encrypt=True;",
        ),
    }


KINDS = _kinds()
PEM_KINDS = ("pem-rsa", "pem-openssh")

_WORDS = [
    "memory",
    "note",
    "meeting",
    "project",
    "deploy",
    "review",
    "budget",
    "plan",
    "customer",
    "design",
    "release",
    "team",
    "weekly",
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "for",
    "with",
    "on",
    "we",
    "our",
    "will",
    "should",
    "about",
    "after",
    "before",
    "policy",
    "token",
    "budget",
    "password",
    "rotation",
    "key",
    "idea",
    "access",
    "cache",
    "index",
    "search",
    "vector",
    "model",
    "prompt",
    "context",
    "summary",
    "migration",
    "schema",
    "server",
    "client",
    "latency",
    "retry",
    "queue",
    "backlog",
    "會議",
    "記錄",
    "データ",
    "🚀",
    "✅",
    "café",
    "naïve",
]

_PROSE = [
    "Our password policy requires 12 characters and rotation every 90 days.",
    "Keep the token budget under 4000 per request; the API key rotation process is documented.",
    "Remember to rotate the secret quarterly and to never paste keys into chat.",
    "The auth flow uses OAuth; access is granted per team.",
    "token_budget: 4096",
    "max_tokens: 2048",
    "primary_key: user_id",
    "api_version: 2024-06-01",
    "password_min_length: 12",
    "Key: value pairs are stored in the settings table.",
    "See ~/.aws/credentials and /home/ana/.ssh/id_ed25519 for the local setup.",
    r"Backups live in C:\Users\ana\secrets\vault.kdbx and config/secrets.yaml.",
    "Password: see the team vault.",
]


def _decoy(rng: random.Random) -> str:
    choice = rng.randrange(12)
    if choice == 0:
        return f"Fixed in commit {_r(rng, HEX, 40)} (see PR #{rng.randint(10, 9999)})."
    if choice == 1:
        return f"- sha256: `{_r(rng, HEX, 64)}`"
    if choice == 2:
        u = _r(rng, HEX, 32)
        return f"request_id={u[:8]}-{u[8:12]}-4{u[13:16]}-a{u[17:20]}-{u[20:]}"
    if choice == 3:
        return rng.choice(
            [
                "API_KEY=<your-api-key>",
                "password: ****",
                "token: xxxxxxxxxxxxxxxx",
                "SECRET_KEY=${SECRET_KEY}",
                "password: changeme",
                "api_key: {{ api_key }}",
                "AWS_SECRET_ACCESS_KEY=$AWS_SECRET",
                "token: REDACTED",
                "password: dummy-password-1",
                "- OPENAI_API_KEY=sk-proj-...",
                "postgres://user:password@localhost:5432/db",
                "https://user:${DB_PASSWORD}@db.local/app",
            ]
        )
    if choice == 4:
        return rng.choice(
            [
                "AWS docs key: AKIAIOSFODNN7EXAMPLE",
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "Stripe test key from the docs: sk_test_4eC39HqLyjWDarjtT1zdp7dc",
                "jwt.io sample: eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
            ]
        )
    if choice == 5:
        return (
            f"![logo](data:image/png;base64,{base64.b64encode(rng.randbytes(rng.randint(60, 400))).decode()})"
        )
    if choice == 6:
        return f"Order {rng.randint(10**15, 10**20)} shipped; call +1 {rng.randint(200, 999)} {rng.randint(1000000, 9999999)}."
    if choice == 7:
        return f"Image digest sha256:{_r(rng, HEX, 64)}, build {_r(rng, HEX, 12)}."
    return rng.choice(_PROSE)


def _prose(rng: random.Random) -> str:
    words = rng.choices(_WORDS, k=rng.randint(8, 24))
    return " ".join(words).capitalize() + "."


def generate_note(
    rng: random.Random, n_secrets: int, n_decoys: int, n_prose: int
) -> tuple[str, list[Planted]]:
    """One Markdown note; returns its text and the planted secrets (exact offsets)."""
    blocks: list[tuple[str, str, str, str] | str] = [_prose(rng) for _ in range(n_prose)]
    blocks += [_decoy(rng) for _ in range(n_decoys)]
    kinds = list(KINDS) + list(PEM_KINDS)
    for _ in range(n_secrets):
        kind = rng.choice(kinds)
        if kind in PEM_KINDS:
            blocks.append((kind, "```\n", _pem(rng, "RSA" if kind == "pem-rsa" else "OPENSSH"), "\n```"))
        else:
            prefix, value, suffix = KINDS[kind](rng)
            blocks.append((kind, prefix, value, suffix))
    rng.shuffle(blocks)
    lines: list[str] = [f"# {rng.choice(_WORDS).capitalize()} notes", ""]
    planted: list[Planted] = []
    offset = sum(len(x) + 1 for x in lines)
    for block in blocks:
        if isinstance(block, str):
            lines.append(block)
            offset += len(block) + 1
            continue
        kind, prefix, value, suffix = block
        lead = "".join(p + "\n" for p in prefix.split("\n")[:-1])  # full lines before the value
        head = prefix.split("\n")[-1]
        line_no = len(lines) + lead.count("\n")
        start = offset + len(lead) + len(head)
        end = start + len(value)
        value_lines = value.split("\n")
        end_line = line_no + len(value_lines) - 1
        end_col = len(value_lines[-1]) + (len(head) if len(value_lines) == 1 else 0)
        planted.append(Planted(kind, value, start, end, line_no, len(head), end_line, end_col))
        chunk = prefix + value + suffix
        lines.extend(chunk.split("\n"))
        offset += len(chunk) + 1
    text = "\n".join(lines) + "\n"
    return text, planted


def generate_corpus(
    seed: int,
    n_files: int,
    secrets_per_file: tuple[int, int] = (1, 4),
    decoys_per_file: tuple[int, int] = (2, 8),
    prose_per_file: tuple[int, int] = (20, 80),
) -> list[tuple[str, str, list[Planted]]]:
    """``n_files`` notes ``(name, text, planted)``, reproducible from ``seed``."""
    rng = random.Random(seed)
    corpus = []
    for i in range(n_files):
        text, planted = generate_note(
            rng, rng.randint(*secrets_per_file), rng.randint(*decoys_per_file), rng.randint(*prose_per_file)
        )
        corpus.append((f"memory/note-{i:04d}.md", text, planted))
    return corpus

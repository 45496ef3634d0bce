"""Tests for mnemo.secrets: ranges, decoys, allow comments, PEM blocks, redaction, corpus metrics."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mnemo.secrets import SecretFinding, default_ruleset, redact_text, scan_text, utf16_col
from mnemo.secrets.rules import shannon_entropy
from secrets_corpus import KINDS, PEM_KINDS, _decoy, _pem, generate_corpus


def _plant(kind: str, seed: int) -> tuple[str, str, int]:
    """A small note with one secret of ``kind``; returns (text, value, start offset)."""
    rng = random.Random(seed)
    intro = "# Deploy notes\n\nThe token budget and password policy are in the wiki.\n"
    if kind in PEM_KINDS:
        value = _pem(rng, "RSA" if kind == "pem-rsa" else "OPENSSH")
        return intro + "```\n" + value + "\n```\n", value, len(intro) + 4
    prefix, value, suffix = KINDS[kind](rng)
    return intro + prefix + value + suffix + "\nDone.\n", value, len(intro) + len(prefix)


def _expected_range(text: str, start: int, end: int) -> tuple[int, int, int, int]:
    line = text.count("\n", 0, start)
    end_line = text.count("\n", 0, end)
    return line, start - (text.rfind("\n", 0, start) + 1), end_line, end - (text.rfind("\n", 0, end) + 1)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("kind", sorted(KINDS) + list(PEM_KINDS))
def test_each_kind_detected_with_exact_range(kind: str, seed: int) -> None:
    text, value, start = _plant(kind, seed)
    end = start + len(value)
    findings = scan_text(text)
    assert len(findings) == 1, findings
    f = findings[0]
    assert (f.start, f.end) == (start, end)
    assert text[f.start : f.end] == value
    assert (f.line, f.start_col, f.end_line, f.end_col) == _expected_range(text, start, end)


def test_decoys_are_not_flagged() -> None:
    rng = random.Random(99)
    lines = [_decoy(rng) for _ in range(600)]
    findings = scan_text("\n".join(lines))
    assert findings == [], [(f.rule_id, f.preview) for f in findings]


@pytest.mark.parametrize(
    "line",
    [
        "AWS docs key: AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "STRIPE_KEY=sk_test_4eC39HqLyjWDarjtT1zdp7dc",
        "API_KEY=<your-api-key>",
        "password: ****",
        "token: xxxxxxxxxxxxxxxx",
        "SECRET_KEY=${SECRET_KEY}",
        "password: changeme",
        "api_key: {{ api_key }}",
        "GITHUB_TOKEN=$GITHUB_TOKEN",
        "token: REDACTED",
        "password: dummy-pass-42",
        "postgres://user:password@localhost:5432/db",
        "Commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it; uuid 123e4567-e89b-42d3-a456-426614174000.",
        "The password policy says 12+ characters; our token budget is 4096.",
    ],
)
def test_placeholders_and_examples_allowed(line: str) -> None:
    assert scan_text(line) == []


def test_allow_comment_suppresses_only_its_line() -> None:
    text, value, _ = _plant("github-pat", 5)
    secret_line = next(line for line in text.splitlines() if value in line)
    allowed = text.replace(secret_line, secret_line + " <!-- mnemo: allow-secret -->")
    assert scan_text(allowed) == []
    both = allowed + secret_line + "\n"
    findings = scan_text(both)
    assert len(findings) == 1 and findings[0].line == both.count("\n") - 1


def test_pem_block_range_spans_lines() -> None:
    text, value, _start = _plant("pem-rsa", 8)
    (f,) = scan_text(text)
    assert f.end_line - f.line == value.count("\n") > 1
    assert f.start_col == 0 and f.end_col == len("-----END RSA PRIVATE KEY-----")
    assert text[f.start : f.end] == value


def test_pem_block_cut_before_its_end_line_is_found_through_its_body() -> None:
    """A private key pasted without its END line matched no rule (both PEM rules need the END line)."""
    _text, value, _ = _plant("pem-rsa", 9)
    cut = value[: value.index("-----END")].rstrip("\n")
    text = "key:\n" + cut + "\n\nThanks, see you.\n"
    (f,) = scan_text(text)
    assert f.rule_id == "mnemo-pem-private-key-truncated" and text[f.start : f.end] == cut
    (full,) = scan_text("key:\n" + value + "\n")  # a whole block keeps the whole-block rule
    assert full.rule_id == "mnemo-pem-private-key"
    for text in (
        "-----BEGIN RSA PRIVATE KEY-----\n...\n",
        "a line starting `-----BEGIN OPENSSH PRIVATE KEY-----` marks a key\n",
        "-----BEGIN PUBLIC KEY-----\n" + cut.split("\n", 1)[1] + "\n",
    ):
        assert scan_text(text) == [], text


def test_redaction_replaces_exactly_the_value_and_rescan_is_clean() -> None:
    for _, text, _planted in generate_corpus(11, 25):
        findings = scan_text(text)
        redacted = redact_text(text, findings)
        expected = text
        for f in sorted(findings, key=lambda f: f.start, reverse=True):
            expected = expected[: f.start] + f"<redacted:{f.rule_id}>" + expected[f.end :]
        assert redacted == expected
        assert scan_text(redacted) == []
    assert redact_text("pw: none here") == "pw: none here"


def test_overlapping_findings_are_redacted_to_the_furthest_end() -> None:
    """Two findings from the same start (a plain scan's and a longer one from a decoded view): the shorter
    one was replaced and the longer one skipped whole, so its tail stayed in the text."""
    short = SecretFinding("r1", "d", 0, 4, 0, 10, 4, 10, "…")
    longer = SecretFinding("r2", "d", 0, 4, 0, 20, 4, 20, "…")
    assert redact_text("key 0123456789abcdef tail", [short, longer]) == "key <redacted:r1> tail"


def test_overlaps_keep_the_most_specific_rule() -> None:
    text, value, _start = _plant("openai", 3)
    env = f"OPENAI_API_KEY={value}\n"
    (f,) = scan_text(env)
    assert f.rule_id == "openai-api-key" and (f.start, f.end) == (15, 15 + len(value))
    assert [x.start for x in scan_text(text + env)] == sorted(x.start for x in scan_text(text + env))


def test_preview_is_masked() -> None:
    for _, text, _planted in generate_corpus(4, 20):
        for f in scan_text(text):
            secret = text[f.start : f.end]
            assert secret not in f.preview and len(f.preview) < len(secret)


def test_utf16_columns_with_emoji_and_cjk() -> None:
    _text, value, _ = _plant("github-pat", 2)
    line = f"🔑🙂 会議メモ token → {value} done"
    (f,) = scan_text("intro\n" + line + "\n")
    assert line[f.start_col : f.end_col] == value
    assert utf16_col(line, f.start_col) == len(line[: f.start_col].encode("utf-16-le")) // 2
    assert utf16_col(line, f.start_col) == f.start_col + 2  # two astral emoji, CJK is 1 unit each
    assert utf16_col("abc", 2) == 2


def test_precision_and_recall_on_generated_corpus() -> None:
    corpus = generate_corpus(20240601, 150)
    tp = fp = fn = 0
    for _, text, planted in corpus:
        got = {(f.start, f.end) for f in scan_text(text)}
        expected = {(p.start, p.end) for p in planted}
        tp += len(got & expected)
        fp += len(got - expected)
        fn += len(expected - got)
    assert tp + fn > 300
    precision, recall = tp / max(1, tp + fp), tp / (tp + fn)
    assert precision >= 0.95, (precision, recall)
    assert recall >= 0.90, (precision, recall)


def test_rules_data_loaded_with_notes() -> None:
    rs = default_ruleset()
    ids = {r.id for r in rs.rules}
    assert len([r for r in rs.rules if r.source == "gitleaks"]) > 150
    assert {"aws-access-token", "generic-api-key", "mnemo-pem-private-key"} <= ids
    assert any(d["id"] == "pkcs12-file" for d in rs.dropped)
    data = Path(__file__).resolve().parents[2] / "server" / "mnemo" / "secrets" / "data"
    assert "MIT License" in (data / "LICENSE-gitleaks").read_text()


def test_entropy_and_empty_input() -> None:
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == pytest.approx(2.0)
    assert scan_text("") == []
    assert isinstance(SecretFinding, type)

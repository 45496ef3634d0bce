"""Scan text for secrets, report exact ranges, and redact them.

Pipeline for one text:
1. one keyword pass (stdlib ``re`` trie over the lowercased text) finds which rules can match and
   on which lines; rules whose keywords are absent never run;
2. each remaining rule runs only on the lines holding its keywords (multi-line rules such as PEM
   blocks run from the first keyword to the end; very common keywords fall back to the whole text);
3. the secret value (gitleaks' secretGroup, else the first non-empty group) is checked against
   entropy, the rule's value requirements and the allowlists (gitleaks' global and per-rule lists,
   our placeholders and documented example keys, and lines carrying ``mnemo: allow-secret``);
4. overlapping findings keep the most specific rule (priority, then the longer value).

Offsets are Python code points. Lines are an editor's (LSP's): ended by ``\\n``, ``\\r\\n`` or ``\\r`` alone
(the ``\\r`` of ``\\r\\n`` stays in the line, past every value).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import regex

from mnemo.secrets.rules import Rule, RuleSet, default_ruleset

# Above this share of the text, a rule runs once on the whole text instead of line by line.
_WHOLE_TEXT_SHARE = 0.3
_LONE_CR = regex.compile(r"\r(?!\n)")
_EXTEND_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


@dataclass(frozen=True)
class SecretFinding:
    rule_id: str
    description: str
    line: int  # 0-based line of the secret's start
    start_col: int  # 0-based, code points within that line
    end_line: int  # 0-based line of the secret's end (== line except multi-line blocks)
    end_col: int  # exclusive
    start: int  # absolute code-point offset of the secret value
    end: int
    preview: str  # masked, never the whole secret


def mask(secret: str) -> str:
    """A short masked preview: a few leading and trailing characters, never the whole value."""
    if len(secret) >= 16:
        return f"{secret[:4]}…{secret[-2:]}"
    if len(secret) >= 8:
        return f"{secret[:2]}…"
    return "…"


def utf16_col(line_text: str, col: int) -> int:
    """Convert a code-point column within ``line_text`` to UTF-16 code units (LSP positions)."""
    head = line_text[:col]
    if head.isascii():
        return len(head)
    return len(head) + sum(1 for ch in head if ord(ch) > 0xFFFF)


class _Lines:
    def __init__(self, text: str) -> None:
        starts = [0]
        find = text.find
        pos = find("\n")
        while pos >= 0:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        self.starts = starts
        self.length = len(text)

    def index(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def span(self, line: int) -> tuple[int, int]:
        end = self.starts[line + 1] if line + 1 < len(self.starts) else self.length
        return self.starts[line], end


def _lowered(text: str) -> str:
    lower = text.lower()
    if len(lower) == len(text):
        return lower
    return "".join(ch.lower()[:1] or ch for ch in text)  # keep offsets aligned (e.g. "İ")


def _keyword_hits(rs: RuleSet, lower: str) -> dict[str, list[int]]:
    """Start offsets of each keyword (the trie finds the longest; contained keywords are implied)."""
    found: dict[str, list[int]] = {}
    for m in rs.keyword_pattern.finditer(lower):
        found.setdefault(m.group(), []).append(m.start())
    hits: dict[str, list[int]] = {}
    for kw, positions in found.items():
        for implied, shift in rs.implied.get(kw, ((kw, 0),)):
            hits.setdefault(implied, []).extend(p + shift for p in positions)
    return hits


def _windows(rule: Rule, positions: list[int], lines: _Lines, size: int) -> list[tuple[int, int]]:
    if not positions:
        return [(0, size)]
    if rule.multiline:
        return [(lines.span(lines.index(min(positions)))[0], size)]
    line_ids = sorted({lines.index(p) for p in positions})
    spans: list[tuple[int, int]] = []
    for line in line_ids:
        start, end = lines.span(line)
        if spans and spans[-1][1] == start:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    if sum(e - s for s, e in spans) > _WHOLE_TEXT_SHARE * size:
        return [(0, size)]
    return spans


def _line_text(text: str, start: int, end: int) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    return text[line_start : line_end if line_end >= 0 else len(text)]


def _candidates(text: str, rs: RuleSet) -> list[tuple[int, int, Rule]]:
    lower = _lowered(text)
    hits = _keyword_hits(rs, lower)
    lines = _Lines(text)
    size = len(text)
    out: list[tuple[int, int, Rule]] = []
    active = set(rs.always)
    for kw in hits:
        active.update(rs.by_keyword.get(kw, ()))
    for index in sorted(active):
        rule = rs.rules[index]
        positions = [p for kw in rule.keywords for p in hits.get(kw, ())]
        if rule.anchor:
            for m in _anchored(rule, sorted(set(positions)), text):
                found = _check(text, rs, rule, m)
                if found:
                    out.append(found)
            continue
        for win_start, win_end in _windows(rule, positions, lines, size):
            for m in rule.pattern.finditer(text, win_start, win_end):
                found = _check(text, rs, rule, m)
                if found:
                    out.append(found)
    return out


def _anchored(rule: Rule, positions: list[int], text: str) -> list[regex.Match[str]]:
    """Matches of an anchored rule, tried at each keyword position (to the end of its line)."""
    matches: list[regex.Match[str]] = []
    line_end = -1
    covered = -1
    pre, window = rule.precheck or (None, 0)
    for pos in positions:
        if pos < covered:
            continue
        if pos >= line_end:
            nl = text.find("\n", pos)
            line_end = nl + 1 if nl >= 0 else len(text)
        if pre is not None and not pre.search(text, pos, min(line_end, pos + window)):
            continue
        m = rule.pattern.match(text, pos, line_end)
        if m:
            matches.append(m)
            covered = m.end()
    return matches


def _check(text: str, rs: RuleSet, rule: Rule, m: regex.Match[str]) -> tuple[int, int, Rule] | None:
    span = rule.secret_span(m)
    if span is None:
        return None
    start, end = span
    while end > start and text[end - 1] in ".,":
        end -= 1  # sentence punctuation after a value is not part of it
    secret = text[start:end]
    if not secret or (not rule.multiline and "\n" in secret) or not rule.value_ok(secret):
        return None
    match_start = m.start()
    if rule.extend_left:
        floor = max(0, match_start - rule.extend_left)
        while match_start > floor and text[match_start - 1] in _EXTEND_CHARS:
            match_start -= 1
    if rs.is_allowed(rule, secret, text[match_start : m.end()], _line_text(text, start, end)):
        return None
    return start, end, rule


def _dedupe(candidates: list[tuple[int, int, Rule]]) -> list[tuple[int, int, Rule]]:
    ranked = sorted(candidates, key=lambda c: (-c[2].priority, -(c[1] - c[0]), c[0], c[2].id))
    kept: list[tuple[int, int, Rule]] = []
    starts: list[int] = []  # kept spans sorted by start, for overlap checks
    for cand in ranked:
        i = bisect.bisect_left(starts, cand[0])
        if i > 0 and kept[i - 1][1] > cand[0]:
            continue
        if i < len(kept) and kept[i][0] < cand[1]:
            continue
        starts.insert(i, cand[0])
        kept.insert(i, cand)
    return kept


def scan_text(text: str, ruleset: RuleSet | None = None) -> list[SecretFinding]:
    """Find secrets in ``text``; sorted by position, overlaps resolved to the most specific rule."""
    if not text:
        return []
    text = _lf_lines(text)
    rs = ruleset or default_ruleset()
    kept = _dedupe(_candidates(text, rs))
    if not kept:
        return []
    lines = _Lines(text)
    marker = rs.line_marker
    findings: list[SecretFinding] = []
    for start, end, rule in kept:
        line, end_line = lines.index(start), lines.index(end)  # values never end with "\n"
        if marker and any(marker in text[slice(*lines.span(n))] for n in {line, end_line}):
            continue
        findings.append(_finding(text, lines, start, end, rule.id, rule.description))
    return findings


def _lf_lines(text: str) -> str:
    """``text`` with each CR that ends a line alone (old Mac files) as an LF: every offset is kept, and
    lines are then an editor's."""
    return _LONE_CR.sub("\n", text) if "\r" in text else text


def _finding(text: str, lines: _Lines, start: int, end: int, rule_id: str, description: str) -> SecretFinding:
    line, end_line = lines.index(start), lines.index(end)
    return SecretFinding(
        rule_id=rule_id,
        description=description,
        line=line,
        start_col=start - lines.starts[line],
        end_line=end_line,
        end_col=end - lines.starts[end_line],
        start=start,
        end=end,
        preview=mask(text[start:end]),
    )


def finding_at(text: str, start: int, end: int, rule_id: str, description: str) -> SecretFinding:
    """A finding for the value ``text[start:end]``, its lines and columns an editor's, as :func:`scan_text`
    gives them."""
    text = _lf_lines(text)
    return _finding(text, _Lines(text), start, end, rule_id, description)


def redact_text(
    text: str,
    findings: Sequence[SecretFinding] | None = None,
    placeholder: str = "<redacted:{rule_id}>",
) -> str:
    """Replace each finding's value (``start:end``) with ``placeholder`` (``{rule_id}`` filled in)."""
    if findings is None:
        findings = scan_text(text)
    parts: list[str] = []
    cursor = 0
    for f in sorted(findings, key=lambda f: (f.start, f.end)):
        if f.start < cursor:  # overlapping input: the earlier replacement covers its head
            cursor = max(cursor, f.end)  # and its tail goes too (a view's span may reach further)
            continue
        parts.append(text[cursor : f.start])
        parts.append(placeholder.format(rule_id=f.rule_id))
        cursor = f.end
    parts.append(text[cursor:])
    return "".join(parts)

"""Disguised secrets: scan views of a text in which an encoded, look-alike or wrapped key reads as itself.

:func:`scan_text` sees the text as written, so a key percent-encoded (``ghp%5F…``), written with a
Cyrillic or full-width letter (``ghр_…``) or wrapped over two lines passes every rule, while a model
reading the text recovers it at once. :func:`scan_disguised` builds up to three views, each only where
its trigger occurs and only over the lines concerned, scans them with the same rules and maps what they
find back to the original text:

* **decoded** (a line with ``%XX``): percent-escapes of ASCII bytes decoded, twice for double encoding;
* **skeleton** (a non-ASCII line): inside a token that mixes Latin letters or digits with Cyrillic or
  Greek look-alikes, or holds full-width or mathematical letters, each such letter becomes its ASCII
  twin (Cyrillic ``р`` -> ``p``, ``ｇ`` -> ``g``); Cyrillic or Greek words are left as they are;
* **joined** (a run of key characters broken by a line break, a ``\\``-continuation or a string
  concatenation such as ``"…" "…"`` or ``"…" + "…"``, or a quoted string of a few key-like pieces
  separated by spaces): the break is removed. A line break is removed only when the two runs around it
  hold at least 16 characters and a digit, so wrapped prose is never joined.

A view's finding is kept only where its value covers a character the view changed (anything else the
plain scan reports itself) and, for the skeleton, where look-alikes are at most half of the value.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import regex

from mnemo.secrets.rules import RuleSet, default_ruleset
from mnemo.secrets.scanner import SecretFinding, finding_at, scan_text

# --- views and their offsets ----------------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """A rewritten copy of some lines of a text, made of pieces: a copied run of the source, or the
    replacement of one edit (each of its characters comes from the edit's whole source span)."""

    text: str
    marks: list[int]  # view offset where each piece starts
    pieces: list[tuple[int, int, bool]]  # (source start, source end, copied) of each piece
    parent: View | None = None  # set when this is a view of a view's text (double decoding)

    def start_of(self, i: int) -> int:
        """The source offset where view character ``i`` begins."""
        k = bisect.bisect_right(self.marks, i) - 1
        start, _, copied = self.pieces[k]
        local = start + (i - self.marks[k]) if copied else start
        return self.parent.start_of(local) if self.parent else local

    def end_of(self, i: int) -> int:
        """The source offset where view character ``i`` ends."""
        k = bisect.bisect_right(self.marks, i) - 1
        start, end, copied = self.pieces[k]
        local = start + (i - self.marks[k]) + 1 if copied else end
        return self.parent.end_of(local - 1) if self.parent else local

    def origin(self, start: int, end: int) -> tuple[int, int]:
        """The source span of the view span ``start:end`` (``end > start``)."""
        return self.start_of(start), self.end_of(end - 1)


Edit = tuple[int, int, str]  # replace source[start:end] with the string


def _line_segments(text: str, edits: Sequence[Edit]) -> list[tuple[int, int]]:
    """Whole lines (with their ``\\n``) covering every edit, adjacent ones merged."""
    segments: list[tuple[int, int]] = []
    for start, end, _ in edits:
        line_start = text.rfind("\n", 0, start) + 1
        nl = text.find("\n", end)
        line_end = nl + 1 if nl >= 0 else len(text)
        if segments and line_start <= segments[-1][1]:
            segments[-1] = (segments[-1][0], max(segments[-1][1], line_end))
        else:
            segments.append((line_start, line_end))
    return segments


def build_view(
    text: str,
    edits: Sequence[Edit],
    segments: Sequence[tuple[int, int]] | None = None,
    parent: View | None = None,
) -> View:
    """Apply ``edits`` (sorted, not overlapping) within ``segments`` (default: the lines they touch)."""
    parts: list[str] = []
    marks: list[int] = []
    pieces: list[tuple[int, int, bool]] = []
    size = 0

    def add(piece: str, start: int, end: int, copied: bool) -> None:
        nonlocal size
        if piece:
            parts.append(piece)
            marks.append(size)
            pieces.append((start, end, copied))
            size += len(piece)

    index = 0
    for seg_start, seg_end in _line_segments(text, edits) if segments is None else segments:
        pos = seg_start
        while index < len(edits) and edits[index][0] < seg_end:
            start, end, new = edits[index]
            index += 1
            if start >= pos:
                add(text[pos:start], pos, start, True)
                add(new, start, end, False)
                pos = end
        add(text[pos:seg_end], pos, seg_end, True)
    return View("".join(parts), marks, pieces, parent)


# --- decoded: percent-escapes ---------------------------------------------------------------------

_PERCENT = regex.compile(r"%([0-7][0-9A-Fa-f])")


def _percent_edits(text: str) -> list[Edit]:
    return [(m.start(), m.end(), chr(int(m.group(1), 16))) for m in _PERCENT.finditer(text)]


def decoded_view(text: str) -> View | None:
    """Percent-escapes of ASCII bytes decoded (twice, for ``%252D``) on the lines with one other than
    ``%20`` (a space joins nothing: links full of ``%20`` are not scanned twice); ``None`` if none."""
    if "%" not in text:
        return None
    edits = _percent_edits(text)
    segments = _line_segments(text, [e for e in edits if e[2] != " "])
    if not segments:
        return None
    view = build_view(text, edits, segments)
    again = _percent_edits(view.text)
    return build_view(view.text, again, [(0, len(view.text))], parent=view) if again else view


# --- skeleton: look-alike letters ------------------------------------------------------------------

# Cyrillic and Greek letters drawn like a Latin letter (Unicode confusables, the unambiguous ones).
_LOOKALIKES = dict(
    zip(
        "аеорсухіјѕԁһԛԝӏАВЕКМНОРСТХУЅІЈԚԜҮοναρικυχϲϳΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹ",
        "aeopcyxijsdhqwlABEKMHOPCTXYSIJQWYovapikuxcjABEZHIKMNOPTYXC",
        strict=True,
    )
)


def _compat_letters() -> dict[str, str]:
    """Full-width and mathematical letters and digits, which NFKC folds to one ASCII character."""
    table: dict[str, str] = {}
    for low, high in ((0xFF01, 0xFF5E), (0x1D400, 0x1D7FF)):
        for code in range(low, high + 1):
            folded = unicodedata.normalize("NFKC", chr(code))
            if len(folded) == 1 and folded.isascii():
                table[chr(code)] = folded
    return table


_COMPAT = _compat_letters()
_TWINS = {**_COMPAT, **_LOOKALIKES}
_LOOK = "[" + "".join(_LOOKALIKES) + "]"
_WIDE = "[\uff01-\uff5e\U0001d400-\U0001d7ff]"
# Where a token (run of non-space) holds a full-width or mathematical character, or an ASCII letter or
# digit and a look-alike with nothing but other non-ASCII characters between them (stdlib ``re``: on
# mostly Latin text it is several times faster than ``regex`` here).
_BETWEEN = r"[^\sA-Za-z0-9]*"
_SUSPECT = re.compile(rf"{_WIDE}|[A-Za-z0-9]{_BETWEEN}{_LOOK}|{_LOOK}{_BETWEEN}[A-Za-z0-9]")
_TWIN_SET = frozenset(_TWINS)
_SPACES = (" ", "\n", "\t", "\r")
_TOKEN_REACH = 256  # a token is looked at up to this far on either side of its look-alike


def _suspect_tokens(text: str) -> list[tuple[int, int]]:
    tokens: list[tuple[int, int]] = []
    size = len(text)
    for m in _SUSPECT.finditer(text):
        pos = m.start()
        if tokens and pos < tokens[-1][1]:
            continue
        floor, ceiling = max(0, pos - _TOKEN_REACH), min(size, pos + _TOKEN_REACH)
        head = max(text.rfind(sp, floor, pos) for sp in _SPACES)
        tails = [i for i in (text.find(sp, pos, ceiling) for sp in _SPACES) if i >= 0]
        tokens.append((head + 1 if head >= 0 else floor, min(tails, default=ceiling)))
    return tokens


def skeleton_view(text: str) -> View | None:
    """Look-alike letters in suspect tokens replaced by their ASCII twins; ``None`` when none."""
    if text.isascii() or _TWIN_SET.isdisjoint(text):
        return None
    edits: list[Edit] = []
    for start, end in _suspect_tokens(text):
        edits.extend((i, i + 1, _TWINS[text[i]]) for i in range(start, end) if text[i] in _TWINS)
    return build_view(text, edits) if edits else None


def _few_lookalikes(value: str) -> bool:
    """A Latin key with some letters swapped, not a Cyrillic or Greek word that happens to match."""
    return 2 * sum(ch in _LOOKALIKES for ch in value) <= len(value)


# --- joined: keys wrapped over lines or split into strings ------------------------------------------

_KEY = r"A-Za-z0-9+/=_-"
_GAPS = (
    regex.compile(rf"(?<=[{_KEY}])\\?\r?\n[ \t]*(?=[{_KEY}])"),  # wrapped, or a \-continuation
    regex.compile(
        rf"(?<=[{_KEY}])([\"'])[ \t]*(?:[+.]|\\)?[ \t]*(?:\r?\n[ \t]*)?\1(?=[{_KEY}])"
    ),  # "…" + "…"
)
_SPACED = regex.compile(rf"([\"'`])((?:[{_KEY}]+ ){{1,3}}[{_KEY}]+)\1")  # "ghp_aB3d eF5g…"
_RUN_BEFORE = regex.compile(rf"(?r)[{_KEY}]{{1,200}}")
_RUN_AFTER = regex.compile(rf"[{_KEY}]{{1,200}}")
_WORD = regex.compile(r"[A-Z]?[a-z]+|[A-Z]+")
_ENDS_LINE = regex.compile(r"[ \t]*(?:[\"'`;,)\]}]|\r?\n|$)")
_MIN_JOINED = 16


def _key_like(joined: str) -> bool:
    return len(joined) >= _MIN_JOINED and any(ch.isdigit() for ch in joined)


def _continues(text: str, after: regex.Match[str]) -> bool:
    """The run after a break continues a key: it is no plain word, or nothing but a closing follows it
    (so a key at the end of a line is not glued to the next line's first word)."""
    return not _WORD.fullmatch(after.group()) or _ENDS_LINE.match(text, after.end()) is not None


def _gap_edits(text: str) -> list[Edit]:
    edits: list[Edit] = []
    for gap in _GAPS:
        for m in gap.finditer(text):
            before = _RUN_BEFORE.match(text, 0, m.start())
            after = _RUN_AFTER.match(text, m.end())
            if before and after and _key_like(before.group() + after.group()) and _continues(text, after):
                edits.append((m.start(), m.end(), ""))
    for m in _SPACED.finditer(text):
        if _key_like(m.group(2).replace(" ", "")):
            base = m.start(2)
            edits.extend((base + i, base + i + 1, "") for i, ch in enumerate(m.group(2)) if ch == " ")
    edits.sort()
    return edits


def joined_view(text: str) -> View | None:
    """Breaks inside a run of key characters removed; ``None`` when there are none."""
    edits = _gap_edits(text)
    return build_view(text, edits) if edits else None


# --- scanning the views ------------------------------------------------------------------------------

Builder = Callable[[str], View | None]
Accept = Callable[[str, View, SecretFinding, RuleSet], bool]


def _any_finding(text: str, view: View, f: SecretFinding, rs: RuleSet) -> bool:
    return True


def _latin_key(text: str, view: View, f: SecretFinding, rs: RuleSet) -> bool:
    start, end = view.origin(f.start, f.end)
    return _few_lookalikes(text[start:end])


def _split_key(text: str, view: View, f: SecretFinding, rs: RuleSet) -> bool:
    """A key of a specific rule cut by a break, not a key complete before it that the next line extends.

    Keyword rules (``generic-*``, ``*-assignment``) take any value after ``key =``, so a joined line would
    lengthen a value that ended at the line's end: they are not trusted here."""
    if f.rule_id.startswith("generic") or f.rule_id.endswith("-assignment"):
        return False
    ends = (view.end_of(i) for i in range(f.start, f.end - 1) if view.start_of(i + 1) > view.end_of(i))
    gap = next(ends, None)
    rule = next((r for r in rs.rules if r.id == f.rule_id), None)
    if gap is None or rule is None:
        return True
    line_start = text.rfind("\n", 0, gap) + 1
    for m in rule.pattern.finditer(text, line_start, gap):
        span = rule.secret_span(m)
        if span is not None and span[1] >= gap - 1:
            return False  # the rule matched the piece before the break on its own
    return True


_VIEWS: tuple[tuple[Builder, Accept], ...] = (
    (decoded_view, _any_finding),
    (skeleton_view, _latin_key),
    (joined_view, _split_key),
)


def scan_disguised(
    text: str, found: Sequence[SecretFinding] = (), ruleset: RuleSet | None = None
) -> list[SecretFinding]:
    """Secrets that only a decoded, skeleton or joined view of ``text`` shows, as findings on ``text``.

    ``found`` are the plain scan's findings: a view's finding inside one of them is not repeated."""
    if not text:
        return []
    rs = ruleset or default_ruleset()
    out: list[SecretFinding] = []
    for build, accept in _VIEWS:
        view = build(text)
        if view is None:
            continue
        for f in scan_text(view.text, rs):
            start, end = view.origin(f.start, f.end)
            if any(k.start <= start and end <= k.end for seq in (found, out) for k in seq):
                continue
            if accept(text, view, f, rs):
                out.append(finding_at(text, start, end, f.rule_id, f.description))
    return out

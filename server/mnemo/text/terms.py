"""Multilingual keyword terms for the BM25 index.

DuckDB's ``fts`` extension only keeps ASCII letters with its default settings, so mnemo indexes a
pre-tokenised column instead: the terms below, joined by single spaces. The fts index then only has to
split on whitespace (and applies its stemmer); everything language-specific happens here.

Rules (``TERMS_VERSION`` changes whenever the output for some input changes):

* The text is NFKC-normalised (full-width letters, ligatures, superscripts...) and each term casefolded.
* A word is a run of Unicode letters, combining marks and digits, so accented Latin, Cyrillic, Greek,
  Arabic, Hebrew, Devanagari... words stay whole. Everything else separates words, apostrophes
  included: ``don't`` gives ``don``, ``t`` (and ``l'homme`` gives ``l``, ``homme``).
* Identifiers also give their parts after the whole: ``memory_search`` gives ``memory_search``,
  ``memory``, ``search``; ``memory-search`` gives the same three terms (the whole is written with ``_``
  because terms keep to letters, marks, digits and underscores); ``CamelCase`` gives ``camelcase``,
  ``camel``, ``case``. Leading and trailing underscores are not part of a word (``__init__`` -> ``init``).
* Runs of CJK characters (Han, Hiragana, Katakana, Hangul) have no spaces between words, so they give
  overlapping character bigrams (``服务器`` gives ``服务``, ``务器``); a one-character run gives that
  character. A query for a word found inside a longer run therefore shares all its bigrams with it.
* No stemming (the fts index stems) and no stopwords (BM25's IDF discounts common terms).
* A term longer than ``MAX_TERM_CHARS`` is cut to that length (a base64 blob must not make a giant term).
"""

from __future__ import annotations

import re
import unicodedata

TERMS_VERSION = "1"

MAX_TERM_CHARS = 100

# Characters of the CJK class, for a regex character class (also used by the chunker's token estimate).
# Han (radicals, iteration and number marks, tone marks), Hiragana (with the combining voicing marks),
# Katakana (with the prolonged sound mark, but not the middle dot, which is punctuation) and Hangul.
CJK_CHARS = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u302f\u3031-\u3035\u3038-\u303c"
    "\u3041-\u3096\u3099-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff\uf900-\ufaff"
    "\uff66-\uff9f\uffa0-\uffdc\U0001aff0-\U0001b16f\U00020000-\U0002fa1f\U00030000-\U000323af"
)
_CJK_RUNS_RE = re.compile(f"[{CJK_CHARS}]+|[^{CJK_CHARS}]+")
_CJK_SEARCH = re.compile(f"[{CJK_CHARS}]").search
_CJK_RUN = re.compile(f"[{CJK_CHARS}]+").fullmatch
_CJK_ALL = re.compile(f"[{CJK_CHARS}]").findall
_JOINER_RE = re.compile(r"[_\-]+")
# The ASCII case of :func:`_camel_parts`, which gives the same parts.
_ASCII_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[^A-Z]+|[A-Z]+[^A-Z]*")

# Python's ``\w`` leaves out combining marks (Arabic vowel signs, Devanagari matras...), so their ranges
# are added to the word class; they are read from :mod:`unicodedata` on first use (~30 ms). Marks outside
# the BMP (historic and some minority scripts) make the character class several times slower, so that
# pattern is only used for a text that has characters outside the BMP at all.
_BMP_MARK_SPANS = ((0x300, 0x3100), (0xA000, 0xAC00), (0xFB00, 0xFE30))
_ASTRAL_MARK_SPANS = ((0x10000, 0x20000), (0xE0100, 0xE01F0))
_patterns: dict[bool, re.Pattern[str]] = {}


def _mark_ranges(spans: tuple[tuple[int, int], ...]) -> str:
    category = unicodedata.category
    ranges: list[str] = []
    for lo, hi in spans:
        start = -1
        for cp in range(lo, hi + 1):
            is_mark = cp < hi and category(chr(cp))[0] == "M"
            if is_mark and start < 0:
                start = cp
            elif not is_mark and start >= 0:
                ranges.append(f"{chr(start)}-{chr(cp - 1)}")
                start = -1
    return "".join(ranges)


def _tokens_re(astral: bool) -> re.Pattern[str]:
    """Words: runs of letters, digits, underscores and combining marks, with single hyphens inside.
    Each pattern is built on first use: the astral marks take ~4x longer to read than the BMP's."""
    pattern = _patterns.get(astral)
    if pattern is None:
        marks = _mark_ranges(_BMP_MARK_SPANS) + (_mark_ranges(_ASTRAL_MARK_SPANS) if astral else "")
        word = f"[\\w{marks}]+"
        pattern = _patterns[astral] = re.compile(f"{word}(?:-{word})*")
    return pattern


def _has_astral(text: str) -> bool:
    """Whether ``text`` has a character outside the BMP (cheaper than ``max(text)`` by 10x)."""
    return not text.isascii() and len(text.encode("utf-16-le", "surrogatepass")) > 2 * len(text)


def _camel_parts(segment: str) -> list[str]:
    """Split ``segment`` (original case) at case changes: ``getHTTPResponse2`` -> get, HTTP, Response2.

    A new part starts at an upper-case letter that follows a lower-case letter or digit, and at the
    last upper-case letter of a run of them when a lower-case letter follows (``HTTPServer`` -> HTTP,
    Server). Digits stay with the part before them.
    """
    parts: list[str] = []
    start = 0
    n = len(segment)
    for i in range(1, n):
        if not segment[i].isupper():
            continue
        prev = segment[i - 1]
        if prev.islower() or prev.isdigit() or (prev.isupper() and i + 1 < n and segment[i + 1].islower()):
            parts.append(segment[start:i])
            start = i
    parts.append(segment[start:])
    return parts


def _cut(term: str) -> str:
    return term if len(term) <= MAX_TERM_CHARS else term[:MAX_TERM_CHARS]


def _word_terms(tok: str, out: list[str]) -> None:
    """Append the terms of one token that is not a plain word or CJK run (the slow path)."""
    if not tok.isascii() and _CJK_SEARCH(tok):
        for run in _CJK_RUNS_RE.findall(tok):
            if not _CJK_SEARCH(run[0]):
                _word_terms(run, out)
            elif len(run) == 1:
                out.append(run)
            else:
                out.extend([run[i : i + 2] for i in range(len(run) - 1)])
        return
    segments = [s for s in _JOINER_RE.split(tok) if s] if ("_" in tok or "-" in tok) else [tok]
    if not segments:
        return
    parts: list[str] = []
    for seg in segments:
        rest = seg[1:]
        if seg.isascii():
            if rest.lower() == rest:
                parts.append(seg.lower())
            else:
                parts.extend([p.lower() for p in _ASCII_CAMEL_RE.findall(seg)])
        elif rest.casefold() == rest:
            parts.append(seg.casefold())
        else:
            parts.extend([p.casefold() for p in _camel_parts(seg)])
    out.append(_cut("_".join(segments).casefold()))
    if len(parts) > 1:
        out.extend([_cut(p) for p in parts])


def _token_terms(tok: str) -> list[str]:
    """The terms of one token that is not a plain ASCII word."""
    if "_" not in tok and "-" not in tok:
        if _CJK_RUN(tok):
            return [tok] if len(tok) == 1 else [tok[i : i + 2] for i in range(len(tok) - 1)]
        if tok.isascii() or not _CJK_SEARCH(tok):
            low = tok.casefold()
            rest = tok[1:]
            if low == tok or rest.casefold() == rest:
                return [_cut(low)]
    out: list[str] = []
    _word_terms(tok, out)
    return out


def index_terms(text: str) -> list[str]:
    """Every term occurrence of ``text``, in order (repeats kept, for BM25 term frequencies)."""
    out: list[str] = []
    if not text:
        return out
    text = unicodedata.normalize("NFKC", text)
    append = out.append
    extend = out.extend
    cache: dict[str, list[str]] = {}  # words repeat a lot: each distinct one is worked out once
    for tok in _tokens_re(_has_astral(text)).findall(text):
        if tok.isascii() and "_" not in tok and "-" not in tok:  # fast path: a plain ASCII word
            low = tok.lower()
            if low == tok or tok[1:] == low[1:]:
                append(low if len(low) <= MAX_TERM_CHARS else low[:MAX_TERM_CHARS])
                continue
        terms = cache.get(tok)
        if terms is None:
            terms = cache[tok] = _token_terms(tok)
        extend(terms)
    return out


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, in order of first occurrence."""
    return list(dict.fromkeys(index_terms(text)))


def terms_string(text: str) -> str:
    """What goes into the fts column: :func:`index_terms` joined by single spaces."""
    return " ".join(index_terms(text))


def token_set(text: str) -> frozenset[str]:
    """The set of terms of ``text`` (for Jaccard overlap between search results)."""
    return frozenset(index_terms(text))


def cjk_share(text: str) -> float:
    """Fraction of the non-space characters of ``text`` that are CJK (0.0 for empty text)."""
    visible = len(text) - sum(1 for c in text if c.isspace())
    return len(_CJK_ALL(text)) / visible if visible else 0.0

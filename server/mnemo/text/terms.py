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
from collections.abc import Callable
from itertools import chain
from typing import Any

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


def lazy_pattern(
    module: dict[str, Any], name: str, pattern: str | Callable[[], str], method: str
) -> Callable[..., Any]:
    """A stand-in for ``re.compile(pattern).<method>`` that compiles on its first call and puts the real
    method in ``module[name]``, the global that callers look up each time (``pattern`` may be a function
    that works it out, then). The CJK character class takes ~3 ms to compile; English text never needs
    it, and a one-shot command pays every compile."""

    def first_call(*args: Any) -> Any:
        compiled = getattr(re.compile(pattern if isinstance(pattern, str) else pattern()), method)
        module[name] = compiled
        return compiled(*args)

    return first_call


_CJK_RUNS_RE_FINDALL = lazy_pattern(
    globals(), "_CJK_RUNS_RE_FINDALL", f"[{CJK_CHARS}]+|[^{CJK_CHARS}]+", "findall"
)
_CJK_SEARCH = lazy_pattern(globals(), "_CJK_SEARCH", f"[{CJK_CHARS}]", "search")
_CJK_RUN = lazy_pattern(globals(), "_CJK_RUN", f"[{CJK_CHARS}]+", "fullmatch")
_CJK_ALL = lazy_pattern(globals(), "_CJK_ALL", f"[{CJK_CHARS}]", "findall")
_JOINER_RE = re.compile(r"[_\-]+")
_ASCII_TOKENS_FINDALL = re.compile(r"\w+(?:-\w+)*", re.ASCII).findall  # _tokens_re's, for ASCII text
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
        for run in _CJK_RUNS_RE_FINDALL(tok):
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


def _plain_terms(tok: str) -> list[str]:
    """The terms of one token of :func:`_tokens_re`."""
    if tok.isascii() and "_" not in tok and "-" not in tok:  # a plain ASCII word
        low = tok.lower()
        if low == tok or tok[1:] == low[1:]:
            return [_cut(low)]
    return _token_terms(tok)


class _Doubled(dict[int, str]):
    """Code point -> that character, a space and the character again, for :meth:`str.translate`, filled
    on first use (a workspace's Chinese text uses a few thousand distinct characters)."""

    MAX_ENTRIES = 50_000

    def __missing__(self, code: int) -> str:
        if len(self) >= self.MAX_ENTRIES:  # text made of every character there is
            self.clear()
        char = chr(code)
        doubled = self[code] = f"{char} {char}"
        return doubled


_DOUBLED = _Doubled()


def cjk_bigrams(run: str) -> str:
    """The overlapping character bigrams of a CJK run, joined by spaces (the run itself when it has one
    or two characters): ``服务器`` gives ``服务 务器``. Every character but the first and last is written
    twice with a space between, by :meth:`str.translate`: about twice as fast as making each bigram a
    string and joining them, and a Chinese build makes hundreds of thousands."""
    return run if len(run) < 3 else run[0] + run[1:-1].translate(_DOUBLED) + run[-1]


class _PieceTerms(dict[str, str]):
    """Piece of text -> its terms joined by spaces ("" for none), every token of the piece in order,
    worked out once per distinct piece.

    Words repeat a lot across a workspace: a full index looks up most of them here (a C-level dict
    lookup) instead of running the per-token rules again. Bounded: cleared when full; a long piece (a
    blob) is not kept."""

    MAX_ENTRIES = 50_000
    MAX_KEY_CHARS = 64

    def __missing__(self, piece: str) -> str:
        if not piece.isascii() and _CJK_RUN(piece):  # most pieces of CJK text: one run, its bigrams
            terms = cjk_bigrams(piece)
        else:
            # A piece of hyphens only has no token. ASCII has no combining marks: the plain word class
            # finds the same tokens without building the marks' class (~5 ms, once a process).
            tokens = (
                _ASCII_TOKENS_FINDALL(piece)
                if piece.isascii()
                else _tokens_re(_has_astral(piece)).findall(piece)
            )
            terms = " ".join(chain.from_iterable(map(_plain_terms, tokens)))
        if len(piece) <= self.MAX_KEY_CHARS:
            if len(self) >= self.MAX_ENTRIES:
                self.clear()
            self[piece] = terms
        return terms


_PIECE_TERMS = _PieceTerms()
_piece_terms = _PIECE_TERMS.__getitem__
# ASCII characters that are never part of a word become spaces; the pieces between spaces are then word
# runs, with hyphens, whose tokens are found by the same regex (``a--b``, ``-x-`` included).
_ASCII_SEPARATORS = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c in "_-")})


_SEPARATOR_BLOCKS = ((0xA0, 0xA1), (0x2000, 0x2070), (0x3000, 0x3040), (0xFE10, 0xFE70), (0xFF00, 0xFFF0))


def _nfkc_separator_class() -> str:
    """A character class of the punctuation and space characters of the blocks above whose NFKC form is
    separators only (no letter, digit, mark, hyphen or underscore): ``，`` is ``,`` under NFKC,
    ``\u3000`` a space. Chinese and Japanese text is often not NFKC-normal only because of them, and
    normalising a whole text costs ~10x more than spacing them out; a text still not normal afterwards
    is normalised. The tokens are the same either way (separators only split)."""

    def separator_only(ch: str) -> bool:
        form = unicodedata.normalize("NFKC", ch)
        return form != ch and not any(c in "_-" or _word_char(c) for c in form)

    chars = [chr(cp) for lo, hi in _SEPARATOR_BLOCKS for cp in range(lo, hi) if separator_only(chr(cp))]
    return "[" + "".join(map(re.escape, chars)) + "]"


_NFKC_SEPARATORS_SUB = lazy_pattern(globals(), "_NFKC_SEPARATORS_SUB", _nfkc_separator_class, "sub")


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_" or unicodedata.category(ch)[0] == "M"


def _pieces(text: str) -> list[str]:
    """Substrings of ``text`` whose tokens, in order, are the tokens of ``text``: for ASCII text, runs
    between separators; otherwise the tokens themselves (so a non-ASCII piece is one token)."""
    if text.isascii():  # ASCII is NFKC already; splitting is many times faster than the regex
        return text.translate(_ASCII_SEPARATORS).split()
    text = _NFKC_SEPARATORS_SUB(" ", text)
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    tokens: list[str] = _tokens_re(_has_astral(text)).findall(text)
    return tokens


def index_terms(text: str) -> list[str]:
    """Every term occurrence of ``text``, in order (repeats kept, for BM25 term frequencies)."""
    return terms_string(text).split()


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, in order of first occurrence."""
    return list(dict.fromkeys(index_terms(text)))


def terms_string(text: str) -> str:
    """What goes into the fts column: :func:`index_terms` joined by single spaces (terms never hold a
    space)."""
    return " ".join(filter(None, map(_piece_terms, _pieces(text)))) if text else ""


def token_set(text: str) -> frozenset[str]:
    """The set of terms of ``text`` (for Jaccard overlap between search results)."""
    return frozenset(index_terms(text))


def cjk_share(text: str) -> float:
    """Fraction of the non-space characters of ``text`` that are CJK (0.0 for empty text)."""
    if text.isascii():
        return 0.0
    visible = len(text) - sum(1 for c in text if c.isspace())
    return len(_CJK_ALL(text)) / visible if visible else 0.0

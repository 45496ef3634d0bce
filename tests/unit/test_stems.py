"""mnemo.text.stems: Python Porter stems equal to DuckDB's fts extension's ``stem(term, 'porter')``, so
the one-shot reader and the PostgreSQL engine score with the same stems as the index was built with."""

from __future__ import annotations

import random
import string

from tests.conftest import SAMPLE_NOTES

from mnemo.index.duck import connect, load_extension
from mnemo.text.stems import porter_stem, porter_stem_list, porter_stems
from mnemo.text.terms import terms_string

ODD_TERMS = [
    "s", "it's", "ß", "İstanbul", "naïve", "café", "x_y", "foo_bar", "ABC", "Ünïcödé", "ﬁne", "123",
    "1st", "e", "ies", "sses", "happily", "relational", "conditional", "generalization", "oscillators",
    "我们决定", "决定使用", "向量", "データベース", "сравнение", "ελληνικά", "ééé", "y", "yy", "sky",
]  # fmt: skip


def duckdb_stems(terms: list[str]) -> dict[str, str]:
    con = connect(":memory:", vss=False)
    load_extension(con, "fts")
    try:
        rows = con.execute("SELECT t, stem(t, 'porter') FROM unnest(?::VARCHAR[]) u(t)", [terms]).fetchall()
    finally:
        con.close()
    return {term: stem or "" for term, stem in rows}


def corpus_terms() -> list[str]:
    """Our tokenizer's terms of the sample notes, odd cases, and random letter strings (Porter's
    rules fire on endings: random words with common English suffixes reach most of them)."""
    terms = {t for text in SAMPLE_NOTES.values() if isinstance(text, str) for t in terms_string(text).split()}
    terms.update(ODD_TERMS)
    rng = random.Random(7)
    suffixes = ["ing", "ed", "ies", "ational", "izer", "fulness", "ousli", "ement", "ance", "ible", "s", "ly"]
    # Endings that are no ASCII letter (the stemmer is not asked): digits, accents, CJK, underscores.
    odd_ends = ["1", "9", "é", "ß", "_", "服", "ー", "й", "ﬁ"]
    for _ in range(4000):
        stem = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 8)))
        terms.add(stem + rng.choice(suffixes))
        terms.add(stem + rng.choice(suffixes) + rng.choice(odd_ends))
    return sorted(terms)


def test_python_stems_equal_the_fts_extension_stems() -> None:
    terms = corpus_terms()
    expected = duckdb_stems(terms)
    got = porter_stems(terms)
    differ = {t: (expected[t], got[t]) for t in terms if expected[t] != got[t]}
    assert differ == {}
    assert porter_stem_list(terms) == [expected[t] for t in terms]  # a build's vocabulary at once
    assert porter_stem("running") == "run" and porter_stem("s") == ""

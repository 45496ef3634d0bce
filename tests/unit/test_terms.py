"""Tests for mnemo.text.terms: multilingual keyword terms for the BM25 column."""

from __future__ import annotations

import random
import unicodedata
from pathlib import Path

import pytest

from mnemo.text import terms as terms_module
from mnemo.text.terms import (
    MAX_TERM_CHARS,
    TERMS_VERSION,
    cjk_bigrams,
    index_terms,
    query_terms,
    terms_string,
    token_set,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", ["hello", "world"]),
        ("API 设计", ["api", "设计"]),
        ("API设计doc", ["api", "设计", "doc"]),
        ("服务器集群部署", ["服务", "务器", "器集", "集群", "群部", "部署"]),
        ("设", ["设"]),
        ("don't", ["don", "t"]),
        ("l'homme", ["l", "homme"]),
        ("memory_search", ["memory_search", "memory", "search"]),
        ("memory-search", ["memory_search", "memory", "search"]),
        ("CamelCase", ["camelcase", "camel", "case"]),
        ("getHTTPResponse2", ["gethttpresponse2", "get", "http", "response2"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        ("iPhone", ["iphone", "i", "phone"]),
        ("Hello HELLO", ["hello", "hello"]),
        ("__init__", ["init"]),
        ("a--b", ["a", "b"]),
        ("-x- _-_", ["x"]),
        ("3.14 v2", ["3", "14", "v2"]),
        ("src/mnemo/index.py", ["src", "mnemo", "index", "py"]),
        ("カタカナー", ["カタ", "タカ", "カナ", "ナー"]),
        ("テスト・ケース", ["テス", "スト", "ケー", "ース"]),
        ("한국어", ["한국", "국어"]),
        ("foo_设计_bar", ["foo", "设计", "bar"]),
        ("", []),
        ("  \n\t ", []),
        ("!!! ... ???", []),
    ],
)
def test_examples(text: str, expected: list[str]) -> None:
    assert index_terms(text) == expected


def test_nfkc_and_casefold() -> None:
    assert index_terms("ＡＰＩ ﬁle x²") == ["api", "file", "x2"]
    assert index_terms("Straße") == index_terms("STRASSE") == ["strasse"]
    assert index_terms("ｶﾀｶﾅ") == index_terms("カタカナ")
    # Decomposed and composed accents give the same term.
    assert index_terms("cafe\u0301") == index_terms("caf\u00e9") == ["café"]


def test_non_latin_words_stay_whole() -> None:
    text = "Привет мир Γειά σου مَرْحَبًا بالعالم हिन्दी שָׁלוֹם naïve"
    assert index_terms(text) == [
        "привет",
        "мир",
        "γειά",
        "σου",
        "مَرْحَبًا",
        "بالعالم",
        "हिन्दी",
        "שָׁלוֹם",
        "naïve",
    ]


def test_marks_outside_the_bmp_stay_in_words() -> None:
    chakma = "\U0001110c\U0001110b\U00011134\U0001111f"  # letters and a vowel sign of the Chakma script
    assert index_terms(f"{chakma} x") == [chakma, "x"]
    assert index_terms(f"😀 {chakma}") == [chakma]


def test_cjk_words_found_separately_match_a_longer_run() -> None:
    doc = token_set("我们在上海讨论了服务器集群部署的方案")
    for query in ["服务器", "集群", "部署", "上海", "服务器集群"]:
        assert set(query_terms(query)) <= doc, query
    assert not set(query_terms("数据库")) <= doc


def test_identifier_forms_share_parts() -> None:
    snake, kebab, camel = token_set("memory_search"), token_set("memory-search"), token_set("memorySearch")
    assert {"memory", "search"} <= snake & kebab & camel
    assert snake == kebab


def test_no_stemming_and_no_stopwords() -> None:
    assert index_terms("The running dogs") == ["the", "running", "dogs"]


def test_repeats_are_kept_for_tf_but_not_in_queries() -> None:
    assert index_terms("b a b A") == ["b", "a", "b", "a"]
    assert query_terms("b a b A") == ["b", "a"]
    assert query_terms("memory_search memory") == ["memory_search", "memory", "search"]


def test_terms_string_round_trips_through_whitespace_split() -> None:
    text = "Hello memory_search 服务器集群 Привет\u00a0мир\u2003x\u3000y"
    assert terms_string(text) == " ".join(index_terms(text))
    assert terms_string(text).split() == index_terms(text)
    assert terms_string("") == ""


def test_token_set() -> None:
    assert token_set("a b a") == frozenset({"a", "b"})
    assert isinstance(token_set("x"), frozenset)


def test_long_terms_are_cut() -> None:
    blob = "A" * 5000
    assert index_terms(blob) == ["a" * MAX_TERM_CHARS]
    assert all(len(t) <= MAX_TERM_CHARS for t in index_terms("x_" + "y" * 300 + " " + "é" * 300))


def _allowed(ch: str) -> bool:
    return ch == "_" or ch.isalnum() or unicodedata.category(ch)[0] == "M"


@pytest.mark.parametrize("seed", range(20))
def test_terms_keep_to_letters_digits_marks_and_underscore(seed: int) -> None:
    rng = random.Random(seed)
    pools = [
        (0x20, 0x7F),  # ASCII, punctuation included
        (0x00, 0x20),  # control characters
        (0xA0, 0x250),  # Latin-1 and extended Latin
        (0x300, 0x370),  # combining marks
        (0x400, 0x500),  # Cyrillic
        (0x600, 0x700),  # Arabic
        (0x900, 0x980),  # Devanagari
        (0x2000, 0x2070),  # general punctuation, odd spaces
        (0x3000, 0x3100),  # CJK symbols, kana
        (0x4E00, 0x4F00),  # Han
        (0xAC00, 0xAD00),  # Hangul
        (0xFF00, 0xFFF0),  # full/half width forms
        (0x1F300, 0x1F700),  # emoji
    ]
    chars = []
    for _ in range(2000):
        lo, hi = rng.choice(pools)
        chars.append(chr(rng.randrange(lo, hi)))
    text = "".join(chars)
    terms = index_terms(text)
    assert terms, "a random text of 2000 characters has some words"
    for term in terms:
        assert term
        assert 0 < len(term) <= MAX_TERM_CHARS
        assert not any(ch.isspace() for ch in term), term
        assert all(_allowed(ch) for ch in term), term
    assert terms_string(text).split() == terms


def _reference_index_terms(text: str) -> list[str]:
    """:func:`index_terms` as it was written first: the regex over the whole text, token by token."""
    out: list[str] = []
    if not text:
        return out
    text = unicodedata.normalize("NFKC", text)
    for tok in terms_module._tokens_re(terms_module._has_astral(text)).findall(text):
        if tok.isascii() and "_" not in tok and "-" not in tok:
            low = tok.lower()
            if low == tok or tok[1:] == low[1:]:
                out.append(low[:MAX_TERM_CHARS])
                continue
        out.extend(terms_module._token_terms(tok))
    return out


_WORDS = [
    "memory_search",
    "memory-search",
    "a--b",
    "-x-",
    "_-_",
    "---",
    "__init__",
    "getHTTPResponse2",
    "HTTPServer",
    "iPhone",
    "HELLO",
    "Hello",
    "v2",
    "3.14",
    "don't",
    "src/mnemo/index.py",
    "x-y-z",
    "ＡＰＩ",
    "ﬁle",
    "x²",
    "Straße",
    "cafe\u0301",
    "naïve",
    "Привет",
    "ΓΕΙΆ",
    "مَرْحَبًا",
    "हिन्दी",
    "服务器集群",
    "カタカナー",
    "テスト・ケース",
    "한국어",
    "foo_设计_bar",
    "API设计doc",
    "ｶﾀｶﾅ",
    "\U0001110c\U0001110b\U00011134",
    "😀",
    "𝒜lpha",
    "𠀀𠀁",
    "Ǆemo",
    "ǅx",
    "İstanbul",
    "ß_ẞ",
    "a" * 70,
    "b" * 150,
    "Camel" * 20,
    "x-" * 40 + "y",
    "é" * 120,
]
_GLUE = [" ", "  ", "\n", "\t", ", ", ". ", "-", "_", "/", "'", "\u00a0", "\u3000", "(", ")", "`", ""]
_GLUE += [
    "，",
    "。",
    "、",
    "：",
    "；",
    "！",
    "？",
    "（",
    "）",
    "「",
    "」",
    "－",
    "＿",
    "\u2011",
    "…",
    "︰",
    "﹏",
]


@pytest.mark.parametrize("seed", range(30))
def test_index_terms_equals_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    ascii_only = seed % 3 == 0  # the translate-and-split path
    words = [w for w in _WORDS if w.isascii()] if ascii_only else _WORDS
    for _ in range(20):
        text = "".join(rng.choice(words) + rng.choice(_GLUE) for _ in range(rng.randint(0, 40)))
        if not ascii_only and rng.random() < 0.3:
            text += "".join(chr(rng.randrange(0x20, 0x3100)) for _ in range(50))
        if not ascii_only and rng.random() < 0.3:  # full-width and small forms, CJK punctuation
            text += "".join(
                chr(rng.choice((0x3000, 0xFE10, 0xFF00)) + rng.randrange(0x70)) for _ in range(50)
            )
        want = _reference_index_terms(text)
        assert index_terms(text) == want, text
        assert index_terms(text) == want, text  # again, from the cache
        assert terms_string(text) == " ".join(want)


def test_chinese_text_with_full_width_punctuation_skips_nfkc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chinese text is NFKC-normal once its full-width punctuation is spaced out: it is not normalised
    (the slow step), and its terms are those of the normalised text."""
    text = "我们决定使用向量搜索，因为：（一）速度快；（二）ＡＰＩ简单！\u3000服务器集群。"
    want = _reference_index_terms(text)
    calls: list[str] = []
    real = unicodedata.normalize
    monkeypatch.setattr(
        terms_module.unicodedata, "normalize", lambda form, s: calls.append(s) or real(form, s)
    )
    assert index_terms(text) == want
    assert calls == [
        text.translate(
            {
                ord("，"): " ",
                ord("："): " ",
                ord("（"): " ",
                ord("）"): " ",
                ord("；"): " ",
                ord("！"): " ",
                0x3000: " ",
            }
        )
    ]  # only for the ＡＰＩ
    calls.clear()
    assert index_terms("我们决定使用向量搜索，速度快。") == [
        "我们",
        "们决",
        "决定",
        "定使",
        "使用",
        "用向",
        "向量",
        "量搜",
        "搜索",
        "速度",
        "度快",
    ]
    assert calls == []


@pytest.mark.parametrize("seed", range(10))
def test_random_text_of_separator_blocks_equals_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    blocks = [
        (0x20, 0x7F),
        (0xA0, 0x100),
        (0x2000, 0x2070),
        (0x3000, 0x3100),
        (0x4E00, 0x4E40),
        (0xFE10, 0xFE70),
        (0xFF00, 0xFFF0),
        (0x300, 0x370),
    ]
    for _ in range(20):
        text = "".join(chr(rng.randrange(*rng.choice(blocks))) for _ in range(rng.randint(1, 80)))
        assert index_terms(text) == _reference_index_terms(text), ascii(text)


def test_a_full_term_cache_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terms_module._PieceTerms, "MAX_ENTRIES", 3)
    text = "alpha Beta gammaDelta alpha epsilon_zeta eta theta Beta"
    for _ in range(3):
        assert index_terms(text) == _reference_index_terms(text)
    assert len(terms_module._PIECE_TERMS) <= 3


@pytest.mark.parametrize(
    "run", ["设", "设计", "服务器", "服务器集群部署", "哈哈哈哈", "𠀀𠀁𠀂", "かなカナ한국어"]
)
def test_cjk_bigrams_are_each_pair_of_neighbours(run: str) -> None:
    expected = [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    assert cjk_bigrams(run).split(" ") == expected


def test_the_doubled_characters_table_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terms_module._Doubled, "MAX_ENTRIES", 4)
    run = "".join(map(chr, range(0x4E00, 0x4E00 + 12)))
    for _ in range(2):
        assert cjk_bigrams(run).split(" ") == [run[i : i + 2] for i in range(len(run) - 1)]
    assert len(terms_module._DOUBLED) <= 4


def test_version() -> None:
    assert isinstance(TERMS_VERSION, str) and TERMS_VERSION


def _fts_extension() -> Path | None:
    try:
        import duckdb_extension_fts
    except ImportError:
        return None
    found = sorted(Path(duckdb_extension_fts.__file__).parent.glob("extensions/*/fts.duckdb_extension"))
    return found[0] if found else None


def test_duckdb_fts_matches_non_latin_terms() -> None:
    duckdb = pytest.importorskip("duckdb")
    ext = _fts_extension()
    if ext is None:
        pytest.skip("the duckdb fts extension is not installed")
    con = duckdb.connect()
    con.execute(f"LOAD '{ext.as_posix()}'")
    docs = ["服务器集群部署 notes", "Привет мир café", "memory_search in CamelCase", "مَرْحَبًا بالعالم हिन्दी"]
    con.execute("CREATE TABLE d(id INTEGER, terms VARCHAR)")
    con.executemany("INSERT INTO d VALUES (?, ?)", [[i, terms_string(t)] for i, t in enumerate(docs)])
    con.execute(
        "PRAGMA create_fts_index('d', 'id', 'terms', stemmer='porter', stopwords='none', "
        "ignore='\\s+', strip_accents=0, lower=0)"
    )
    for query, want in [
        ("部署", 0),
        ("服务器", 0),
        ("café", 1),
        ("ПРИВЕТ", 1),
        ("memorySearch", 2),
        ("हिन्दी", 3),
    ]:
        rows = con.execute(
            "SELECT id FROM (SELECT id, fts_main_d.match_bm25(id, ?) AS s FROM d) WHERE s IS NOT NULL "
            "ORDER BY s DESC",
            [" ".join(query_terms(query))],
        ).fetchall()
        assert rows and rows[0][0] == want, query

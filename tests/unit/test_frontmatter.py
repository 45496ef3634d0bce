"""Tests for mnemo.markdown.frontmatter: the tolerant YAML-subset front matter parser."""

from __future__ import annotations

import random

import pytest

from mnemo.markdown.frontmatter import FrontMatter, front_matter_end, parse_front_matter

SKILL = """---
name: web-search
description: "Search the web: use when the user asks about \\"news\\"" # trailing comment
version: 2
---
# Web search

Body.
"""


def test_skill_front_matter() -> None:
    fm = parse_front_matter(SKILL)
    assert fm.data == {
        "name": "web-search",
        "description": 'Search the web: use when the user asks about "news"',
        "version": "2",
    }
    assert fm.body_start_line == 6
    assert SKILL.split("\n")[fm.body_start_line - 1] == "# Web search"
    assert fm.problem is None


def test_no_front_matter() -> None:
    assert parse_front_matter("# Title\n\n---\nname: x\n---\n") == FrontMatter({}, 1, None)
    assert parse_front_matter("") == FrontMatter({}, 1, None)


def test_value_forms() -> None:
    text = "\n".join(
        [
            "---",
            "plain: hello world  # a comment",
            "hash: use C# here",
            "colon: a: b",
            "single: 'it''s # not a comment'",
            'double: "tab\\tnew\\nline"',
            "empty:",
            "tags:",
            "  - one",
            "  - 'two'",
            "folded: >",
            "  first line",
            "  second line",
            "",
            "  next paragraph",
            "literal: |-",
            "  line 1",
            "    indented",
            "continued: plain text",
            "  goes on",
            "# a comment line",
            "allowed-tools: Read, Grep",
            "---",
            "body",
        ]
    )
    fm = parse_front_matter(text)
    assert fm.problem is None
    assert fm.data == {
        "plain": "hello world",
        "hash": "use C# here",
        "colon": "a: b",
        "single": "it's # not a comment",
        "double": "tab\tnew\nline",
        "empty": "",
        "tags": "one, two",
        "folded": "first line second line\nnext paragraph",
        "literal": "line 1\n  indented",
        "continued": "plain text goes on",
        "allowed-tools": "Read, Grep",
    }
    assert fm.body_start_line == 24


def test_not_closed() -> None:
    fm = parse_front_matter("---\nname: x\ndescription: y\n")
    assert fm.data == {}
    assert fm.body_start_line == 1
    assert fm.problem is not None and "not closed" in fm.problem


def test_bad_line_keeps_the_rest() -> None:
    fm = parse_front_matter("---\nname: x\nthis is not yaml\ndescription: y\n---\nbody")
    assert fm.data == {"name": "x", "description": "y"}
    assert fm.problem == "line 3: expected key: value"
    assert fm.body_start_line == 6


def test_unterminated_quote_and_duplicate_key() -> None:
    fm = parse_front_matter('---\nname: "oops\nname: again\n---\n')
    assert fm.data == {"name": "again"}
    assert fm.problem == "line 2: unterminated quoted string"
    fm = parse_front_matter("---\nname: a\nname: b\n---\n")
    assert fm.data == {"name": "b"}
    assert fm.problem is not None and "duplicate key 'name'" in fm.problem


def test_crlf_bom_and_dots_closer() -> None:
    fm = parse_front_matter("\ufeff---\r\nname: x\r\n...\r\nbody\r\n")
    assert fm.data == {"name": "x"}
    assert fm.body_start_line == 4
    assert fm.problem is None


def test_empty_block() -> None:
    assert parse_front_matter("---\n---\nbody") == FrontMatter({}, 3, None)


def test_front_matter_end() -> None:
    assert front_matter_end(["---", "a: b", "---", "x"]) == 2
    assert front_matter_end(["---", "a: b"]) is None
    assert front_matter_end(["# x", "---"]) is None
    assert front_matter_end([]) is None


@pytest.mark.parametrize("seed", range(30))
def test_garbage_never_raises(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "ab: '\"|>-#\n\t\\[]{}"
    body = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 300)))
    fm = parse_front_matter("---\n" + body + "\n---\ntext")
    assert isinstance(fm.data, dict)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in fm.data.items())
    assert fm.body_start_line >= 1

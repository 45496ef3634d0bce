"""Lines inside fenced code or an HTML comment are text to the editor's features (mnemo.markdown.structure):
MEMORY.md's sections, consolidation's memory lines, hygiene's links, a commit message's sections."""

from __future__ import annotations

from datetime import date

import pytest

from mnemo.editor import consolidation, hygiene, memory_edits, vcs
from mnemo.markdown.structure import markdown_lines


def _marked(text: str) -> list[str]:
    """The lines that are Markdown."""
    lines = text.split("\n")
    return [line for line, markdown in zip(lines, markdown_lines(lines), strict=True) if markdown]


@pytest.mark.parametrize(
    ("text", "markdown"),
    [
        ("a\n```\n# code\n```\nb", ["a", "b"]),
        ("a\n~~~~\n```\n# code\n~~~\n# still code\n~~~~~\nb", ["a", "b"]),  # (a shorter or other fence)
        ("a\n```\n# code\n``` not a close\n# still code\n```\nb", ["a", "b"]),
        ("``` a`b\n# heading", ["``` a`b", "# heading"]),  # a backtick fence's info has no backtick
        ("    ```\n# heading", ["    ```", "# heading"]),  # indented four: code, not a fence
        ("a\n<!--\n## Draft\n- [x](gone.md)\n-->\nb", ["a", "b"]),
        ("a\n   <!-- one line --> and more\nb", ["a", "b"]),
        ("a\n<!-- opened\n```\n## Draft\n-->\n## Real", ["a", "## Real"]),  # a fence in a comment
        ("a\n```\n<!--\n```\n## Real", ["a", "## Real"]),  # a comment in fenced code
        ("a\n<!-- never closed\n## Draft", ["a"]),
        ("a\n```\nnever closed\n## code", ["a"]),
        ("a\r\n```\r\n# code\r\n```\r\nb\r", ["a\r", "b\r"]),  # (CR line ends left on)
        ("text <!-- inline --> text\n## Real", ["text <!-- inline --> text", "## Real"]),
    ],
)
def test_what_is_markdown(text: str, markdown: list[str]) -> None:
    assert _marked(text) == markdown


MEMORY = (
    "# Memory\n\n## Preferences\n\n- Tea: oolong, no sugar.\n\n"
    "<!-- old layout, kept for reference\n## Old\n\n- Coffee: black, two sugars, every morning.\n-->\n\n"
    "~~~\n```\n## Not a section either\n~~~\n\n## Projects\n\n- Atlas ships billing in March.\n"
)


def _applied(text: str, edit: memory_edits.TextEdit) -> list[str]:
    lines = text.split("\n")
    (row, _), (end_row, _) = edit.start, edit.end
    assert row == end_row and edit.start[1] == 0  # (an insertion at a line's start)
    return lines[:row] + edit.new_text.split("\n")[:-1] + lines[row:] if row < len(lines) else lines


def test_a_commented_out_heading_is_no_section_and_a_promotion_never_lands_in_a_comment() -> None:
    """A promotion to "Old" went inside the comment (before its "-->"): written, and hidden."""
    assert [s.title for s in memory_edits.sections(MEMORY)] == ["Preferences", "Projects"]
    edit = memory_edits.promote_edit("MEMORY.md", MEMORY, "Old", ["- Coffee: oat milk now."])
    assert edit.start[0] >= len(MEMORY.split("\n")) - 1  # a new section at the end
    assert "## Old" in edit.new_text and "- Coffee: oat milk now." in edit.new_text
    edit = memory_edits.promote_edit("MEMORY.md", MEMORY, "Preferences", ["- Water: sparkling."])
    after = _applied(MEMORY, edit)
    at = after.index("- Water: sparkling.")
    assert markdown_lines(after)[at] and after.index("## Projects") > at > after.index("## Preferences")


def test_consolidation_compares_no_commented_out_line() -> None:
    found = consolidation.memory_lines("MEMORY.md", MEMORY, day=date(2026, 12, 1), rank=0)
    bodies = [line.body for line in found]
    assert bodies == ["Tea: oolong, no sugar.", "Atlas ships billing in March."]


def test_a_link_in_a_comment_or_fenced_code_is_not_checked() -> None:
    text = (
        "# Links\n\n[live](memory/missing.md)\n\n<!--\n[draft](memory/also-missing.md)\n-->\n\n"
        "~~~\n```\n[code](memory/in-code.md)\n~~~\n"
    )
    problems = hygiene.link_problems("MEMORY.md", text, {"MEMORY.md"})
    assert [p.message for p in problems] and all("missing.md" in p.message for p in problems)
    assert len(problems) == 1 and problems[0].start[0] == 2


def test_a_commit_message_sums_up_real_sections_only() -> None:
    found = vcs.sections(MEMORY)
    assert list(found) == ["# Memory", "# Memory > ## Preferences", "# Memory > ## Projects"]
    assert "Coffee" in found["# Memory > ## Preferences"]  # (the comment is that section's text)

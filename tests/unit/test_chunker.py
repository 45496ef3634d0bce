"""Tests for mnemo.markdown.chunker: property checks over random documents plus targeted cases."""

from __future__ import annotations

import hashlib
import itertools
import random
import re

import pytest

from mnemo.markdown.chunker import FENCE_MAX_FACTOR, Chunk, approx_tokens, chunk_markdown
from mnemo.markdown.version import CHUNKER_VERSION

FENCE_OPEN = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)$")


def fences(lines: list[str], body: int = 0) -> list[tuple[int, int]]:
    """Reference scan: (first, last) 0-based line indexes of each fenced block, closing line included
    (a fence line inside an HTML comment opens none)."""
    out: list[tuple[int, int]] = []
    i = body
    while i < len(lines):
        if lines[i].lstrip().startswith("<!--"):
            while i < len(lines) and "-->" not in lines[i]:
                i += 1
            i += 1
            continue
        m = FENCE_OPEN.match(lines[i])
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = m.group(1)
            j = i + 1
            while j < len(lines) and not (
                lines[j].strip().startswith(fence) and not lines[j].strip().strip(fence[0])
            ):
                j += 1
            last = min(j, len(lines) - 1)
            while not lines[last].strip():  # an unclosed fence ends at its last non-blank line
                last -= 1
            out.append((i, last))
            i = j + 1
        else:
            i += 1
    return out


def body_start(lines: list[str]) -> int:
    if lines and lines[0].lstrip("\ufeff").rstrip() == "---":
        for i in range(1, len(lines)):
            if lines[i].rstrip() in ("---", "..."):
                return i + 1
    return 0


def check(path: str, text: str, chunks: list[Chunk], target: int) -> None:
    """The invariants every chunking must satisfy."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    body = body_start(lines)
    covered: set[int] = set()
    prev_start = 0
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        assert c.start_line >= prev_start, "chunks are in file order"
        prev_start = c.start_line
        assert c.start_line > body, "front matter is not chunked"
        span = "\n".join(lines[c.start_line - 1 : c.end_line]).lstrip("\ufeff")
        if c.text != span:
            # Only a piece of one long line may differ from its lines.
            assert c.start_line == c.end_line and c.text in span and approx_tokens(span) > target
        assert lines[c.start_line - 1].strip() and lines[c.end_line - 1].strip(), "edges are not blank"
        assert c.content_hash == hashlib.sha256(c.text.encode()).hexdigest()
        want_key = hashlib.sha256(
            (path + "\x1f" + " > ".join(c.heading_path) + "\x1f" + c.content_hash).encode()
        ).hexdigest()[:32]
        assert c.key == want_key
        covered.update(range(c.start_line - 1, c.end_line))
    for i in range(body, len(lines)):
        if lines[i].strip().lstrip("\ufeff"):
            assert i in covered, f"line {i + 1} is in no chunk"
    for first, last in fences(lines, body):
        if approx_tokens("\n".join(lines[first : last + 1])) > FENCE_MAX_FACTOR * target:
            continue
        for c in chunks:
            assert not first < c.start_line - 1 <= last, f"chunk starts inside fence {first + 1}-{last + 1}"
            assert not first <= c.end_line - 1 < last, f"chunk ends inside fence {first + 1}-{last + 1}"


WORDS = [
    "memory",
    "search",
    "index",
    "chunk",
    "vector",
    "note",
    "daily",
    "project",
    "服务器",
    "设计",
    "café",
    "привет",
]


def random_doc(rng: random.Random) -> str:
    parts: list[str] = []
    if rng.random() < 0.3:
        parts.append("---\nname: x\ndescription: y\n---")
    for _ in range(rng.randrange(1, 25)):
        r = rng.random()
        if r < 0.15:
            parts.append("#" * rng.randint(1, 6) + " " + rng.choice(WORDS))
        elif r < 0.25:
            fence = rng.choice(["```", "~~~", "````"])
            body = "\n".join(rng.choice(["code()", "", "# not a heading", "```", "x = 1"]) for _ in range(40))
            body = body[: rng.randrange(0, len(body) + 1)]
            close = "" if rng.random() < 0.1 else "\n" + fence
            parts.append(f"{fence}py\n{body}{close}")
        elif r < 0.3:
            lines = rng.choices(
                ["<!-- note", "", "# not a heading", "```", "text -->", "x"], k=rng.randint(1, 6)
            )
            parts.append("<!--\n" + "\n".join(lines) + rng.choice(["\n-->", "", " -->"]))
        elif r < 0.4:
            parts.append(
                "\n".join(f"- {' '.join(rng.choices(WORDS, k=rng.randint(1, 12)))}" for _ in range(8))
            )
        elif r < 0.45:
            parts.append(" ".join(rng.choices(WORDS, k=rng.randint(100, 400))))
        else:
            parts.append("\n".join(" ".join(rng.choices(WORDS, k=rng.randint(1, 15))) for _ in range(5)))
    return rng.choice(["\n\n", "\n", "\n\n\n"]).join(parts) + rng.choice(["", "\n", "\n\n  \n"])


@pytest.mark.parametrize("seed", range(60))
def test_invariants_on_random_documents(seed: int) -> None:
    rng = random.Random(seed)
    text = random_doc(rng)
    if rng.random() < 0.3:
        text = text.replace("\n", "\r\n")
    target = rng.choice([16, 32, 64, 256])
    overlap = rng.choice([0.0, 0.2, 0.4])
    chunks = chunk_markdown("memory/2024-01-01.md", text, target_tokens=target, overlap=overlap)
    check("memory/2024-01-01.md", text, chunks, target)
    assert chunks == chunk_markdown("memory/2024-01-01.md", text, target_tokens=target, overlap=overlap)


@pytest.mark.parametrize("text", ["", " ", "\n\n  \t\n", "\r\n"])
def test_empty_input(text: str) -> None:
    assert chunk_markdown("a.md", text) == []


def test_front_matter_only() -> None:
    assert chunk_markdown("a.md", "---\nname: x\n---\n\n") == []


def test_heading_paths() -> None:
    text = "intro\n# A\na\n## B\nb\n### C\nc\n## D\nd\n# E ##\ne\n#hashtag is text\n"
    chunks = chunk_markdown("a.md", text)
    assert [(c.heading_path, c.start_line, c.end_line) for c in chunks] == [
        ((), 1, 1),
        (("A",), 2, 3),
        (("A", "B"), 4, 5),
        (("A", "B", "C"), 6, 7),
        (("A", "D"), 8, 9),
        (("E",), 10, 12),
    ]
    assert chunks[1].text == "# A\na"


def test_heading_level_skip_and_empty_heading() -> None:
    chunks = chunk_markdown("a.md", "### Deep\nx\n# Top\ny\n#\nz")
    assert [c.heading_path for c in chunks] == [("Deep",), ("Top",), ("",)]


def test_tiny_sibling_sections_are_not_merged() -> None:
    text = "\n".join(f"## S{i}\nshort" for i in range(10))
    chunks = chunk_markdown("a.md", text, target_tokens=1000)
    assert [c.heading_path for c in chunks] == [(f"S{i}",) for i in range(10)]


def test_front_matter_is_skipped_and_line_numbers_are_original() -> None:
    text = "---\nname: x\ndescription: y\n---\n\n# Title\nbody"
    [chunk] = chunk_markdown("skills/x/SKILL.md", text)
    assert (chunk.start_line, chunk.end_line, chunk.text) == (6, 7, "# Title\nbody")


def test_unclosed_front_matter_is_text() -> None:
    [chunk] = chunk_markdown("a.md", "---\nname: x\n")
    assert chunk.start_line == 1 and chunk.text == "---\nname: x"


def test_headings_inside_fences_are_not_headings() -> None:
    text = "# Real\n```sh\n# comment\n~~~\n```\n## After"
    chunks = chunk_markdown("a.md", text)
    assert [c.heading_path for c in chunks] == [("Real",), ("Real", "After")]
    assert chunks[0].text == "# Real\n```sh\n# comment\n~~~\n```"


def test_longer_fence_needs_a_long_enough_close() -> None:
    text = "# A\n````md\n```\n# inside\n```\n````\n# B"
    chunks = chunk_markdown("a.md", text)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 6), (7, 7)]


def test_unclosed_fence_runs_to_end_of_file() -> None:
    text = "# A\ntext\n\n```\ncode\n# not a heading\n\n## nor this\n\n"
    chunks = chunk_markdown("a.md", text, target_tokens=4, overlap=0)
    assert [c.heading_path for c in chunks] == [("A",)] * len(chunks)
    assert chunks[-1].start_line == 4 and chunks[-1].end_line == 8
    check("a.md", text, chunks, 4)


def test_fence_larger_than_target_is_one_oversized_chunk() -> None:
    code = "\n".join(f"line_{i} = {i} * 2  # some code" for i in range(60))
    text = f"# Code\n\nIntro paragraph.\n\n```python\n{code}\n```\n\nAfter."
    chunks = chunk_markdown("a.md", text, target_tokens=64)
    fence_chunks = [c for c in chunks if "```python" in c.text]
    assert len(fence_chunks) == 1
    assert fence_chunks[0].text == f"```python\n{code}\n```"
    assert approx_tokens(fence_chunks[0].text) > 64
    check("a.md", text, chunks, 64)


def test_pathological_fence_is_cut_at_lines() -> None:
    code = "\n".join(f"value_{i} = {i}" for i in range(2000))
    text = f"```\n{code}\n```"
    chunks = chunk_markdown("a.md", text, target_tokens=32)
    assert len(chunks) > 10
    assert max(approx_tokens(c.text) for c in chunks) <= 32 * 2
    check("a.md", text, chunks, 32)


def test_long_line_is_split_into_pieces_with_the_same_line_number() -> None:
    line = " ".join(f"word{i}" for i in range(5000))
    text = f"# T\n\nbefore\n{line}\nafter"
    chunks = chunk_markdown("a.md", text, target_tokens=50, overlap=0)
    pieces = [c for c in chunks if c.start_line == 4]
    assert len(pieces) > 10
    assert all(c.end_line == 4 for c in pieces)
    assert " ".join(c.text for c in pieces) == line
    assert max(approx_tokens(c.text) for c in pieces) <= 50
    assert chunks[0].text == "# T\n\nbefore" and chunks[-1].text == "after"
    check("a.md", text, chunks, 50)


def test_huge_line_without_spaces() -> None:
    text = "x" * 2_000_000
    chunks = chunk_markdown("a.md", text, target_tokens=256)
    assert "".join(c.text for c in chunks) == text
    assert max(len(c.text) for c in chunks) <= 256 * 4
    assert {(c.start_line, c.end_line) for c in chunks} == {(1, 1)}


def test_crlf_gives_the_same_chunks_as_lf() -> None:
    rng = random.Random(7)
    text = random_doc(rng)
    assert chunk_markdown("a.md", text.replace("\n", "\r\n"), target_tokens=32) == chunk_markdown(
        "a.md", text, target_tokens=32
    )
    assert chunk_markdown("a.md", "a\rb") == chunk_markdown("a.md", "a\nb")


def test_bom_is_not_part_of_the_text() -> None:
    [chunk] = chunk_markdown("a.md", "\ufeff# Title\nx")
    assert chunk.text == "# Title\nx" and chunk.heading_path == ("Title",)


def paragraphs(n: int, lines_each: int, words: int = 8) -> list[str]:
    return [
        "\n".join(f"p{p} l{line} " + " ".join(["word"] * words) for line in range(lines_each))
        for p in range(n)
    ]


def test_split_prefers_paragraph_boundaries_and_sizes() -> None:
    text = "# Log\n\n" + "\n\n".join(paragraphs(20, 3))
    target = 64
    chunks = chunk_markdown("a.md", text, target_tokens=target, overlap=0)
    lines = text.split("\n")
    assert len(chunks) > 5
    for c in chunks[1:]:
        assert lines[c.start_line - 2] == "", "each chunk starts a paragraph"
    for c in chunks[:-1]:
        assert target / 2 <= approx_tokens(c.text) <= target * 1.1
    check("a.md", text, chunks, target)


def test_split_at_list_items_when_there_are_no_blank_lines() -> None:
    items = [f"- item {i} " + " ".join(["word"] * 6) + "\n  continued here with words" for i in range(30)]
    text = "# L\n" + "\n".join(items)
    chunks = chunk_markdown("a.md", text, target_tokens=48, overlap=0)
    assert len(chunks) > 3
    for c in chunks[1:]:
        assert c.text.startswith("- item"), c.text[:30]


def test_overlap_repeats_trailing_whole_lines() -> None:
    text = "# Log\n\n" + "\n\n".join(paragraphs(10, 6, words=4))
    target = 64
    with_overlap = chunk_markdown("a.md", text, target_tokens=target, overlap=0.2)
    assert len(with_overlap) > 3
    for a, b in itertools.pairwise(with_overlap):
        assert a.start_line < b.start_line <= a.end_line, "the next chunk repeats the end of the previous"
        repeated = "\n".join(text.split("\n")[b.start_line - 1 : a.end_line])
        assert a.text.endswith(repeated) and b.text.startswith(repeated)
        assert approx_tokens(repeated) <= 1.5 * 0.2 * target
    without = chunk_markdown("a.md", text, target_tokens=target, overlap=0)
    for a, b in itertools.pairwise(without):
        assert b.start_line > a.end_line
    check("a.md", text, with_overlap, target)


def test_overlap_never_enters_a_fence_or_crosses_a_heading() -> None:
    text = "# A\n" + "\n".join(f"line {i} " + "w " * 10 for i in range(30)) + "\n```\ncode\n```\n# B\nb"
    chunks = chunk_markdown("a.md", text, target_tokens=32, overlap=0.4)
    check("a.md", text, chunks, 32)
    assert chunks[-1].text == "# B\nb"


def test_edit_changes_only_the_keys_of_the_touched_section() -> None:
    sections = {name: "\n\n".join(paragraphs(6, 3)) for name in ["Alpha", "Beta", "Gamma"]}

    def render(secs: dict[str, str]) -> str:
        return "\n\n".join(f"## {name}\n\n{body}" for name, body in secs.items())

    before = chunk_markdown("MEMORY.md", render(sections), target_tokens=64)
    edited = dict(sections)
    edited["Beta"] = edited["Beta"].replace("p2 l1", "p2 l1 EDITED and made longer", 1)
    edited["Alpha"] = "New first line.\n\n" + edited["Alpha"]
    after = chunk_markdown("MEMORY.md", render(edited), target_tokens=64)

    def keys(chunks: list[Chunk], name: str) -> list[str]:
        return [c.key for c in chunks if c.heading_path == (name,)]

    assert keys(before, "Gamma") == keys(after, "Gamma"), "line numbers moved, keys did not"
    assert [c.start_line for c in before if c.heading_path == ("Gamma",)] != [
        c.start_line for c in after if c.heading_path == ("Gamma",)
    ]
    changed = set(keys(before, "Beta")) ^ set(keys(after, "Beta"))
    assert changed and len(set(keys(before, "Beta")) & set(keys(after, "Beta"))) >= 1
    assert len(set(keys(before, "Alpha")) & set(keys(after, "Alpha"))) >= 1


def test_key_depends_on_path_and_heading() -> None:
    [a] = chunk_markdown("a.md", "same text")
    [b] = chunk_markdown("b.md", "same text")
    assert a.content_hash == b.content_hash and a.key != b.key
    assert len(a.key) == 32


def test_custom_token_counter() -> None:
    def words(s: str) -> int:
        return len(s.split())

    text = "\n".join(" ".join(["w"] * 5) for _ in range(40))
    chunks = chunk_markdown("a.md", text, target_tokens=20, overlap=0, count_tokens=words)
    assert len(chunks) == 10
    assert all(words(c.text) == 20 for c in chunks)


def test_approx_tokens() -> None:
    assert approx_tokens("") == 0
    assert approx_tokens("a") == 1
    assert approx_tokens("abcd") == 1
    assert approx_tokens("abcde") == 2
    assert approx_tokens("设计") == 2
    assert approx_tokens("设计 abcd") == 4  # 2 CJK + ceil(5 / 4)
    assert approx_tokens(" ") == 1
    assert approx_tokens("é" * 8) == 2


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        chunk_markdown("a.md", "x", target_tokens=0)
    with pytest.raises(ValueError):
        chunk_markdown("a.md", "x", overlap=1.0)


def test_version() -> None:
    assert isinstance(CHUNKER_VERSION, str) and CHUNKER_VERSION


def test_heading_only_sections_open_the_next_section() -> None:
    # Reported: `# On-call` (L1-L1) came back as a search result of its own.
    text = "# On-call\n\n## Weekdays\n\n- Alice carries the pager.\n\n## Weekends\n\n- Bruno covers.\n"
    chunks = chunk_markdown("memory/oncall.md", text)
    assert [(c.heading_path, c.start_line, c.end_line) for c in chunks] == [
        (("On-call", "Weekdays"), 1, 5),
        (("On-call", "Weekends"), 7, 9),
    ]
    assert chunks[0].text.startswith("# On-call\n\n## Weekdays")
    # A chain of empty headings joins the first section with text; only a heading at the very end of a
    # file (nothing to join) stays alone.
    chunks = chunk_markdown("a.md", "# A\n## B\n### C\ntext\n# D")
    assert [(c.start_line, c.end_line, c.heading_path) for c in chunks] == [
        (1, 4, ("A", "B", "C")),
        (5, 5, ("D",)),
    ]
    assert not [c for c in chunks[:-1] if all(ln.lstrip().startswith("#") for ln in c.text.splitlines())]
    check("a.md", "# A\n## B\n### C\ntext\n# D", chunks, 256)


def test_headings_and_fences_inside_html_comments_are_text() -> None:
    # A `#` line inside a multi-line `<!-- ... -->` started a section (CommonMark: an HTML block of type 2
    # runs from `<!--` to the line holding `-->`, blank lines included).
    text = "# Real\n<!-- draft\n\n# not a heading\n```\n-->\n## After\ntext\n<!-- one line -->\n# Last\nend"
    chunks = chunk_markdown("a.md", text)
    assert [(c.heading_path, c.start_line, c.end_line) for c in chunks] == [
        (("Real",), 1, 6),
        (("Real", "After"), 7, 9),
        (("Last",), 10, 11),
    ]
    assert chunks[0].text == "# Real\n<!-- draft\n\n# not a heading\n```\n-->"
    # `<!-->` closes itself (CommonMark), an indented opener too opens one, an unclosed one runs to the end.
    assert [c.heading_path for c in chunk_markdown("a.md", "# A\n<!-->\n# B\nx")] == [("A",), ("B",)]
    unclosed = "# A\n  <!--\n# B\ntext\n\n## C\nmore"
    assert [c.heading_path for c in chunk_markdown("a.md", unclosed)] == [("A",)]
    # Inside a fence, `<!--` opens nothing.
    fenced = "# A\n```\n<!--\n```\n# B\nx"
    assert [c.heading_path for c in chunk_markdown("a.md", fenced)] == [("A",), ("B",)]
    check("a.md", text, chunks, 256)

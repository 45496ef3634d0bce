"""Hygiene checks: exact ranges, the injection cut, near-duplicates from vectors, broken links."""

from __future__ import annotations

import numpy as np
import pytest

from mnemo.editor import hygiene, memory_edits
from mnemo.index import nearest_across

SECRET = "ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cD1fG3hJ5"


def test_secret_range_is_utf16() -> None:
    text = f"# T\n😀 token {SECRET}\n"
    (p,) = hygiene.secret_problems(text)
    col = len("😀 token ") + 1  # the emoji is a surrogate pair
    assert (p.start, p.end, p.code, p.severity) == ((1, col), (1, col + len(SECRET)), "github-pat", "error")
    assert SECRET not in p.message


def test_budget_marks_exactly_the_cut_lines() -> None:
    text = "# Memory\n" + "".join(f"- fact {i:02d}\n" for i in range(10))  # 9 + 10 x 11 characters
    assert hygiene.injected_line_count(text, 9 + 3 * 11) == 4
    (p,) = hygiene.budget_problems("MEMORY.md", text, 9 + 3 * 11)
    assert p.start == (4, 0) and p.end == (10, len("- fact 09"))
    assert p.data == {"firstCutLine": 5, "lastLine": 11}
    assert hygiene.budget_problems("MEMORY.md", text, len(text)) == []
    assert hygiene.budget_problems("memory/x.md", text, 10) == [], "only MEMORY.md is injected"


def test_near_duplicates_across_files_only() -> None:
    base = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    body = "- The billing service uses PostgreSQL with row-level security."
    mine = [hygiene.ChunkVector("memory/a.md", 3, 4, "A", "## A\n" + body, base)]
    theirs = [
        hygiene.ChunkVector("MEMORY.md", 7, 8, "D", "## D\n" + body, np.array([0.99, 0.1, 0.0], np.float32)),
        hygiene.ChunkVector(
            "memory/b.md", 1, 2, "B", "## B\n" + "unrelated text " * 4, np.array([0, 1.0, 0])
        ),
    ]
    text = "# A\n\n## A\n" + body + "\n"
    space = hygiene.VectorSpace.of(mine + theirs)
    (p,) = hygiene.duplicate_problems("memory/a.md", space, 0.95, text)
    assert p.start == (2, 0) and p.end == (3, len(body))
    assert p.related[0].path == "MEMORY.md" and (p.related[0].start_line, p.related[0].end_line) == (7, 8)
    assert hygiene.duplicate_problems("memory/a.md", space, 0.999, text) == []
    twin = hygiene.ChunkVector("memory/a.md", 9, 10, "A2", "## A2\n" + body, base)
    assert (
        hygiene.duplicate_problems("memory/a.md", hygiene.VectorSpace.of([*mine, twin]), 0.5, text) == []
    ), "same file is not a duplicate"


def test_broken_links_markdown_and_wiki() -> None:
    known = {"MEMORY.md", "memory/deploy.md", "memory/2026-11-02.md"}
    text = (
        "See [deploy](deploy.md), [root](memory/deploy.md), [gone](memory/gone.md), [web](https://x.y/a.md)\n"
        "[[deploy]] [[2026-11-02|that day]] [[nowhere]]\n```\n[[in code]]\n```\n"
    )
    found = hygiene.link_problems("memory/note.md", text, known)
    assert [(p.start[0], p.data["target"]) for p in found] == [(0, "memory/gone.md"), (1, "nowhere")]
    line = text.split("\n")[0]
    assert found[0].start == (0, line.index("memory/gone.md"))


def test_file_problems_sorted_and_promote_and_delete_edits() -> None:
    text = f"# M\n\n## Keys\n- token {SECRET}\n- [x](memory/none.md)\n"
    kinds = [
        p.kind for p in hygiene.file_problems("MEMORY.md", text, known={"MEMORY.md"}, budget_chars=10_000)
    ]
    assert kinds == ["secret", "broken-link"]
    memory = "# Memory\n\n## A\n- one\n\n## B\n- two\n"
    edit = memory_edits.promote_edit("MEMORY.md", memory, "A", ["- new fact", ""])
    assert (edit.start, edit.new_text) == ((4, 0), "- new fact\n")
    end = memory_edits.promote_edit("MEMORY.md", memory, "B", ["- last"])
    assert (end.start, end.new_text) == ((7, 0), "- last\n")
    assert memory_edits.delete_lines_edit("x.md", "a\nb\nc", 3, 3).start == (1, 1)
    assert memory_edits.delete_lines_edit("x.md", "a\nb\nc\n", 2, 2).end == (2, 0)


def test_a_duplicate_chunk_is_removed_without_its_leading_headings() -> None:
    from mnemo.editor.memory_edits import duplicate_body_lines

    text = "# Billing\n\n## Decisions\n- PostgreSQL.\n- Row-level security.\n\n## Other\n- kept\n"
    assert duplicate_body_lines(text, 1, 6) == (4, 6)
    assert duplicate_body_lines(text, 4, 5) == (4, 5)
    first, last = duplicate_body_lines("# Only\n\n## Headings\n", 1, 3)
    assert first > last  # nothing but headings: nothing to remove


def test_the_duplicate_removal_edit_keeps_headings_and_is_none_for_headings_only() -> None:
    from mnemo.editor.memory_edits import duplicate_removal_edit

    text = "# Billing\n\n## Decisions\n- PostgreSQL.\n"
    edit = duplicate_removal_edit("memory/billing.md", text, 1, 4)
    assert edit is not None and edit.start == (3, 0) and edit.new_text == ""
    assert duplicate_removal_edit("memory/h.md", "# Only\n\n## Headings\n", 1, 3) is None


def _each_file_alone(chunks: list[hygiene.ChunkVector]) -> dict[str, list[tuple[int, int, float]]]:
    """The per-file answer: each file's rows against every row, its own file left out (the old pass)."""
    m = np.array([c.vector for c in chunks], dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    paths = np.array([c.path for c in chunks])
    out = {}
    for path in sorted(set(paths.tolist())):
        rows = np.flatnonzero(paths == path)
        sims = m[rows] @ m.T
        sims[:, paths == path] = -2.0
        best = np.argmax(sims, axis=1)
        out[path] = [
            (chunks[r].start_line, chunks[int(j)].start_line, float(sims[k, j]))
            for k, (r, j) in enumerate(zip(rows, best, strict=True))
        ]
    return out


def test_the_whole_pass_in_blocks_finds_what_each_file_finds_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A workspace pass works out every chunk's nearest chunk in blocks of rows (one product per file
    was bound by memory: 41 s a pass at 10,000 notes); the answer must be the per-file one."""
    rng = np.random.default_rng(3)
    paths = [f"memory/n{i % 40:02d}.md" for i in range(130)]  # files' chunks interleaved
    vectors = rng.standard_normal((130, 24)).astype(np.float32)
    vectors[77] = vectors[5] + 0.01  # a near-duplicate across two files
    chunks = [
        hygiene.ChunkVector(p, i, i + 1, "h", "x" * 60, v)
        for i, (p, v) in enumerate(zip(paths, vectors, strict=True))
    ]
    monkeypatch.setattr(nearest_across, "BLOCK_FLOATS", 130 * 16)  # blocks of 16 rows
    monkeypatch.setattr(nearest_across, "BLOCK_ROWS", 16)
    whole, alone = hygiene.VectorSpace.of(chunks), _each_file_alone(chunks)
    for path in sorted(set(paths)):
        got, want = whole.nearest_other(path), alone[path]
        assert [(a.start_line, b.start_line) for a, b, _ in got] == [(a, b) for a, b, _ in want]
        assert np.allclose([c for *_, c in got], [c for *_, c in want], atol=1e-5)
        assert all(a.path != b.path for a, b, _ in got)
    (pair,) = [(a, b, c) for a, b, c in whole.nearest_other(paths[5]) if a.start_line == 5]
    assert pair[1].start_line == 77 and pair[2] > 0.99

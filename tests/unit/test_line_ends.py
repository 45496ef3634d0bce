"""Positions computed from a memory file's text count lines as an editor does (LSP: a line ends at LF, CRLF
or a CR alone), so a file with old Mac line ends (CR alone) gets its diagnostics and edits on its lines."""

from __future__ import annotations

import numpy as np

from mnemo.editor import hygiene, memory_edits
from mnemo.memory.reading import editor_lines, file_lines
from mnemo.secrets import scan_text

SECRET = "ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cD1fG3hJ5"
HEAD = "token 😀 "  # the emoji is two UTF-16 code units
CR_FILE = f"# Keys\r\r{HEAD}{SECRET}\r- end\r"


def test_editor_lines_split_as_lsp_does() -> None:
    assert editor_lines("a\rb\r\nc\nd") == ["a", "b", "c", "d"]
    assert editor_lines("a\r\r\nb\r") == ["a", "", "b", ""], (
        "a text ending with a line end has an empty last line"
    )
    assert editor_lines("a\fb\u2028c\x85d") == ["a\fb\u2028c\x85d"], "not str.splitlines"
    assert file_lines("a\rb\r") == ["a", "b"]


def test_a_secret_in_a_cr_only_file_is_on_its_line_in_utf16() -> None:
    (p,) = hygiene.secret_problems(CR_FILE)
    col = len(HEAD) + 1
    assert (p.start, p.end) == ((2, col), (2, col + len(SECRET)))
    assert CR_FILE[p.data["start"] : p.data["end"]] == SECRET, "offsets are the text's"
    lf = hygiene.secret_problems(CR_FILE.replace("\r", "\n"))
    crlf = hygiene.secret_problems(CR_FILE.replace("\r", "\r\n"))
    assert [(q.start, q.end) for q in lf] == [(q.start, q.end) for q in crlf] == [(p.start, p.end)]


def test_the_scanner_counts_cr_only_lines_and_allows_per_line() -> None:
    (f,) = scan_text(CR_FILE)
    assert (f.line, f.start_col, f.end_line, f.end_col) == (2, len(HEAD), 2, len(HEAD) + len(SECRET))
    # The allow marker on another line of a CR-only file does not allow this line's secret.
    assert len(scan_text(CR_FILE + "ok mnemo: allow-secret\r")) == 1
    assert scan_text(f"# Keys\r{HEAD}{SECRET} mnemo: allow-secret\r") == []


def test_a_redaction_in_a_cr_only_file_replaces_the_secret() -> None:
    (edit,) = memory_edits.redact_edits("memory/k.md", CR_FILE, 2, 2)
    col = len(HEAD) + 1
    assert (edit.start, edit.end) == ((2, col), (2, col + len(SECRET)))
    assert memory_edits.redact_edits("memory/k.md", CR_FILE, 0, 1) == []


def test_a_broken_link_in_a_cr_only_file_is_on_its_line() -> None:
    text = "# Links\r```\r[[in code]]\r```\rsee 😀 [[nowhere]]\r"
    (p,) = hygiene.link_problems("memory/n.md", text, {"memory/n.md"})
    col = len("see 😀 [[") + 1
    assert (p.start, p.end) == ((4, col), (4, col + len("nowhere")))


def test_the_injection_cut_of_a_cr_only_memory_file() -> None:
    lf = "# Memory\n" + "".join(f"- fact {i:02d}\n" for i in range(10))
    for text in (lf.replace("\n", "\r"), lf.replace("\n", "\r\n")):
        end = 2 if "\r\n" in text else 1
        budget = len("# Memory") + end + 7 * (len("- fact 00") + end)  # the last three lines do not fit
        (p,) = hygiene.budget_problems("MEMORY.md", text, budget)
        assert p.start == (8, 0) and p.end == (10, len("- fact 09")), repr(text[:12])
        assert p.data == {"firstCutLine": 9, "lastLine": 11}


def test_a_near_duplicate_in_a_cr_only_file_is_on_its_lines() -> None:
    body = "- The billing service uses PostgreSQL with row-level security."
    vector = np.array([1.0, 0.0], dtype=np.float32)
    mine = hygiene.ChunkVector("memory/a.md", 3, 4, "A", "## A\n" + body, vector)
    theirs = hygiene.ChunkVector("MEMORY.md", 7, 8, "D", "## D\n" + body, vector)
    text = f"# A\r\r## A\r{body}\r"
    (p,) = hygiene.duplicate_problems("memory/a.md", hygiene.VectorSpace.of([mine, theirs]), 0.9, text)
    assert p.start == (2, 0) and p.end == (3, len(body))


def test_removing_and_promoting_lines_of_cr_only_files() -> None:
    text = "# Billing\r\r## Decisions\r- PostgreSQL.\r- Row-level security.\r"
    edit = memory_edits.duplicate_removal_edit("memory/b.md", text, 1, 5)
    assert edit is not None and (edit.start, edit.end) == ((3, 0), (5, 0))
    assert memory_edits.selected_lines(text, 3, 4) == ["- PostgreSQL.", "- Row-level security."]
    last = memory_edits.delete_lines_edit("memory/b.md", "a\rb\rc", 3, 3)
    assert (last.start, last.end) == ((1, 1), (2, 1))
    memory = "# Memory\r\r## A\r- one\r\r## B\r- two\r"
    assert [(s.title, s.heading_line, s.insert_line) for s in memory_edits.sections(memory)] == [
        ("A", 2, 4),
        ("B", 5, 7),
    ]
    promoted = memory_edits.promote_edit("MEMORY.md", memory, "A", ["- new fact"])
    assert (promoted.start, promoted.new_text) == ((4, 0), "- new fact\r"), "the file's own line end"

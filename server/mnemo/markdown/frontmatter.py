"""Front matter: a leading ``---`` ... ``---`` block of simple YAML, as in ``skills/*/SKILL.md``.

Only the subset memory files use is understood, without a YAML library: ``key: value`` pairs with plain,
single- or double-quoted values, ``|`` and ``>`` block scalars, plain values continued on indented
lines, and ``- item`` lists (kept as one string, items joined by ``", "``). Values are strings.

Parsing never raises. A problem (the block is not closed, a line is not ``key: value``...) is reported
in :attr:`FrontMatter.problem` (the first one, with its 1-based line number), and whatever did parse
is kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

_KEY_RE = re.compile(r"([A-Za-z0-9_][\w.\-]*|\"[^\"]*\"|'[^']*')[ \t]*:(?:[ \t]+(.*)|[ \t]*)$")
_BLOCK_RE = re.compile(r"([|>])[+\-]?[1-9]?[ \t]*(?:#.*)?$")
_COMMENT_RE = re.compile(r"[ \t]+#.*$")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/", "0": "\0", "r": "\r"}


@dataclass(frozen=True)
class FrontMatter:
    """The parsed front matter of a Markdown file."""

    data: dict[str, str] = field(default_factory=dict)
    body_start_line: int = 1
    """1-based line where the body starts (1 when there is no front matter)."""
    problem: str | None = None


def front_matter_end(lines: Sequence[str]) -> int | None:
    """0-based index of the line closing a front matter block that opens on the first line, else None.

    The block opens with a ``---`` line (a byte order mark before it is allowed) and closes with the
    next ``---`` or ``...`` line.
    """
    if not lines or lines[0].lstrip("\ufeff").rstrip() != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            return i
    return None


def _unquote(value: str, lineno: int) -> tuple[str, str | None]:
    """The value of a scalar written on one line, and a problem if it is malformed."""
    if value[:1] == '"':
        out: list[str] = []
        i = 1
        while i < len(value):
            c = value[i]
            if c == '"':
                return "".join(out), None
            if c == "\\" and i + 1 < len(value):
                out.append(_ESCAPES.get(value[i + 1], value[i + 1]))
                i += 2
                continue
            out.append(c)
            i += 1
        return "".join(out), f"line {lineno}: unterminated quoted string"
    if value[:1] == "'":
        end = 1
        while True:
            end = value.find("'", end)
            if end < 0:
                return value[1:].replace("''", "'"), f"line {lineno}: unterminated quoted string"
            if value[end + 1 : end + 2] == "'":
                end += 2
                continue
            return value[1:end].replace("''", "'"), None
    return _COMMENT_RE.sub("", value).strip(), None


def _block_scalar(style: str, lines: list[str]) -> str:
    """The value of a ``|`` (literal) or ``>`` (folded) block from its indented lines."""
    while lines and not lines[-1].strip():
        lines.pop()
    indents = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    cut = min(indents, default=0)
    body = [ln[cut:] for ln in lines]
    if style == "|":
        return "\n".join(body)
    out = ""
    for ln in body:
        if not ln.strip():
            out += "\n"
        elif out and not out.endswith("\n"):
            out += " " + ln.strip()
        else:
            out += ln.strip()
    return out


def parse_front_matter(text: str) -> FrontMatter:
    """Parse the front matter at the start of ``text`` (a whole Markdown file)."""
    if not text.lstrip("\ufeff").startswith("---"):
        return FrontMatter()  # most notes: no need to split the whole text into lines
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if not lines or lines[0].lstrip("\ufeff").rstrip() != "---":
        return FrontMatter()
    end = front_matter_end(lines)
    if end is None:
        return FrontMatter(problem="front matter is not closed (no closing --- line)")
    data: dict[str, str] = {}
    problem: str | None = None
    i = 1
    while i < end:
        line = lines[i]
        lineno = i + 1
        i += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _KEY_RE.match(line)
        if m is None or line[:1] in " \t":
            problem = problem or f"line {lineno}: expected key: value"
            continue
        key = m.group(1).strip("\"'")
        raw = (m.group(2) or "").strip()
        # Indented lines that follow belong to this key.
        cont: list[str] = []
        while i < end and (not lines[i].strip() or lines[i][:1] in " \t"):
            cont.append(lines[i])
            i += 1
        block = _BLOCK_RE.match(raw)
        if block is not None:
            value = _block_scalar(block.group(1), cont)
        elif raw[:1] in ("'", '"'):
            value, bad = _unquote(raw, lineno)
            problem = problem or bad
            if any(c.strip() for c in cont):
                problem = problem or f"line {lineno}: multi-line quoted strings are not supported"
        else:
            items = [c.strip() for c in cont if c.strip()]
            if raw == "" and items and all(it.startswith("- ") or it == "-" for it in items):
                value = ", ".join(_unquote(it[1:].strip(), lineno)[0] for it in items)
            else:
                value = " ".join([_unquote(raw, lineno)[0], *(_COMMENT_RE.sub("", it) for it in items)])
                value = value.strip()
        if key in data:
            problem = problem or f"line {lineno}: duplicate key {key!r}"
        data[key] = value
    return FrontMatter(data=data, body_start_line=end + 2, problem=problem)

"""Other ways of reading a text that hide a secret from the rules, for the outbound filter.

A model reads a key whatever its spelling, but the secret rules match its plain form. So the filter also
scans these *views* of a text, each built only when the text can hold what it undoes, and maps what they
find back to the text's own characters:

- **percent-decoded**: ``%5F`` and the like (ASCII only) as the characters they stand for
  (``?auth=ghp%5F...`` in a URL);
- **look-alike letters**: full-width forms (``ｇｈｐ＿``) and Cyrillic or Greek letters drawn like Latin
  ones (``ghр_`` with a Cyrillic ``р``) as those Latin letters, one character for one;
- **wrapped**: a line break inside a run of key characters taken out when the next line is only the rest
  of the key (and a closing quote or bracket): a key wrapped in a config file or a message, with or
  without a ``\\`` before the break and indentation after it.

A view only ever adds findings: the text itself is scanned too. Text that needs none of them (ASCII with
no ``%XX`` and no key-like run at a line end) is scanned once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_PERCENT = re.compile(r"%([0-7][0-9A-Fa-f])")
# A break after 16 key characters, before a line that is only the rest of a key (and a closing quote or
# bracket): "Retry after..." after an example key is a new sentence, not the key's end.
_WRAP = re.compile(
    r"(?<=[A-Za-z0-9_+/=-]{16})[ \t]*\\?[ \t]*\r?\n[ \t]*"
    r"(?=[A-Za-z0-9_+/=-]{4,}[\"'`,;)\]}]*[ \t]*(?:\r?\n|$))"
)

_CONFUSABLE = {
    **{0xFF01 + i: chr(0x21 + i) for i in range(0x5E)},  # full-width ASCII
    **{ord(c): a for c, a in zip("аеорсухіјѕԁһԛԝ", "aeopcyxijsdhqw", strict=True)},  # Cyrillic small
    **{ord(c): a for c, a in zip("АВЕКМНОРСТХУІЈЅ", "ABEKMHOPCTXYIJS", strict=True)},  # Cyrillic capital
    **{ord(c): a for c, a in zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧοκνρυχ", "ABEZHIKMNOPTYXokvpux", strict=True)},  # Greek
}
"""Characters drawn like an ASCII character, to that character (one for one: offsets are kept)."""

_LETTERS = "".join(chr(c) for c in _CONFUSABLE if c < 0xFF01)
_LOOK_ALIKE_IN_KEY = re.compile(f"[A-Za-z0-9_-][{_LETTERS}]|[{_LETTERS}][A-Za-z0-9_-]|[\uff01-\uff5e]{{8}}")
"""Where a look-alike can hide a key: a Cyrillic or Greek one beside an ASCII letter, digit, ``_`` or
``-`` (not in Russian or Greek prose), or a run of eight full-width characters."""


@dataclass(frozen=True)
class View:
    """Another reading of a text: ``text``, and for each of its characters the span of the original text
    it stands for (``starts[i]`` to ``ends[i]``)."""

    text: str
    starts: list[int]
    ends: list[int]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that the view's ``start:end`` reads."""
        return self.starts[start], self.ends[end - 1]


class _Builder:
    """A view made of pieces of the original text, kept or replaced."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []

    def keep(self, text: str, start: int, end: int) -> None:
        self.parts.append(text[start:end])
        self.starts.extend(range(start, end))
        self.ends.extend(range(start + 1, end + 1))

    def replace(self, by: str, start: int, end: int) -> None:
        self.parts.append(by)
        self.starts.extend([start] * len(by))
        self.ends.extend([end] * len(by))

    def view(self) -> View:
        return View("".join(self.parts), self.starts, self.ends)


def _rewritten(text: str, pattern: re.Pattern[str], by: Callable[[re.Match[str]], str]) -> View | None:
    """``text`` with every match of ``pattern`` replaced by ``by(match)`` (None: no match)."""
    builder = _Builder()
    cursor = 0
    for m in pattern.finditer(text):
        builder.keep(text, cursor, m.start())
        builder.replace(by(m), m.start(), m.end())
        cursor = m.end()
    if cursor == 0:
        return None
    builder.keep(text, cursor, len(text))
    return builder.view()


def percent_decoded(text: str) -> View | None:
    if "%" not in text:
        return None
    return _rewritten(text, _PERCENT, lambda m: chr(int(m.group(1), 16)))


def unwrapped(text: str) -> View | None:
    if "\n" not in text:
        return None
    return _rewritten(text, _WRAP, lambda m: "")


def look_alikes_plain(text: str) -> View | None:
    if text.isascii() or not _LOOK_ALIKE_IN_KEY.search(text):
        return None
    plain = text.translate(_CONFUSABLE)
    if plain == text:
        return None
    offsets = list(range(len(text)))
    return View(plain, offsets, [i + 1 for i in offsets])


def views(text: str) -> Iterator[View]:
    """The views of ``text`` that differ from it (see the module's docstring)."""
    for make in (percent_decoded, look_alikes_plain, unwrapped):
        view = make(text)
        if view is not None:
            yield view

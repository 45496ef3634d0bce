"""The metadata values mnemo needs from a GGUF file before llama.cpp loads it, read by walking the
file's key-value pairs until they have been seen.

``gguf.GGUFReader`` parses the whole file first, building a NumPy view for every part of every field,
the tokenizer's vocabulary included: 1.2 s of CPU for MiniLM's 30,522 tokens and 2.9 s for SmolLM2's
vocabulary and merges, paid at every model load (a hybrid `mnemo search` from the command line, a
server's first embedding, the chat model's start). The values read here come before the tokenizer's
arrays in the files gguf's writer makes (llama.cpp's converters, mnemo's own), so the walk stops after
a few dozen pairs; where they do not, the arrays are skipped without being read.

The layout (GGUF versions 2 and 3, little- or big-endian): ``GGUF``, the version (u32), the tensor and
key-value counts (u64 each), then each pair: the key (u64 length, UTF-8 bytes), its value type (u32)
and the value; an array is its item type (u32), its length (u64) and the items.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

DEFAULT_CONTEXT_LENGTH = 512
"""What :func:`context_length` returns for a model that does not say (BERT's window)."""

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """Not a GGUF file this reader understands, or one cut short."""


class _Fields:
    """Reads values from ``file`` in the byte order of its header."""

    def __init__(self, file: BinaryIO, order: str, size: int) -> None:
        self.file = file
        self.order = order
        self.size = size

    def take(self, size: int) -> bytes:
        """The next ``size`` bytes (a length read from a damaged file is checked before any is read)."""
        self._check(size)
        return self.file.read(size)

    def scalar(self, code: str) -> object:
        return struct.unpack(self.order + code, self.take(struct.calcsize(code)))[0]

    def u32(self) -> int:
        return int(struct.unpack(self.order + "I", self.take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack(self.order + "Q", self.take(8))[0])

    def string(self) -> str:
        return self.take(self.u64()).decode("utf-8", errors="replace")

    def value(self, kind: int) -> object:
        """A scalar or string value; an array is skipped and read as None."""
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise GGUFError(f"unknown value type {kind}")
        item, count = self.u32(), self.u64()
        if item in _SCALARS:
            self.skip(count * struct.calcsize(_SCALARS[item]))
        else:
            for _ in range(count):  # strings (their lengths must be read) or nested arrays
                if item == _STRING:
                    self.skip(self.u64())
                else:
                    self.value(item)
        return None

    def skip(self, size: int) -> None:
        """Move past ``size`` bytes, which must be in the file."""
        self._check(size)
        self.file.seek(size, 1)

    def _check(self, size: int) -> None:
        if size > self.size - self.file.tell():
            raise GGUFError("the file ends inside its metadata")


def metadata(path: Path) -> Iterator[tuple[str, object]]:
    """The file's (key, value) pairs in their order; array values are None (skipped). Raises
    :class:`GGUFError` for a file that is not GGUF, of another version, or cut short; ``OSError`` as
    opening it does."""
    with path.open("rb") as file:
        head = file.read(24)
        if len(head) < 24 or head[:4] != b"GGUF":
            raise GGUFError("no GGUF header")
        order = "<" if struct.unpack_from("<I", head, 4)[0] < 0x10000 else ">"
        version = struct.unpack_from(order + "I", head, 4)[0]
        if version not in (2, 3):
            raise GGUFError(f"GGUF version {version} is not supported (2 or 3)")
        _, count = struct.unpack_from(order + "QQ", head, 8)
        fields = _Fields(file, order, os.fstat(file.fileno()).st_size)
        for _ in range(count):
            key = fields.string()
            yield key, fields.value(fields.u32())


def context_length(path: Path) -> int:
    """``<architecture>.context_length`` (the window the model was trained with), or
    :data:`DEFAULT_CONTEXT_LENGTH` when the file has none; raises :class:`GGUFError` when it names no
    architecture."""
    arch: str | None = None
    lengths: dict[str, object] = {}
    for key, value in metadata(path):
        if key == "general.architecture":
            arch = str(value)
        elif key.endswith(".context_length"):
            lengths[key] = value
        if arch is not None and f"{arch}.context_length" in lengths:
            break
    if arch is None:
        raise GGUFError("no general.architecture in its metadata")
    found = lengths.get(f"{arch}.context_length")
    if found is None:
        return DEFAULT_CONTEXT_LENGTH
    if not isinstance(found, int) or isinstance(found, bool):
        raise GGUFError(f"{arch}.context_length is {found!r}, not an integer")
    return found

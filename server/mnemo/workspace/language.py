"""How much of a workspace's memory is written in CJK scripts (Chinese, Japanese, Korean).

The embedding provider ``auto`` uses it once, when a workspace's index is first built: the bundled
MiniLM does not understand Chinese (cmrc2018-zh vector-only Recall@5 0.35, cross-language 0.15), the
multilingual USE-m3 does (0.91 and 1.00) but trails MiniLM a little on English (docs/benchmarks.md,
"Multilingual vectors"), so a workspace written mostly in CJK gets USE-m3 and any other MiniLM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mnemo.text.terms import CJK_CHARS

from .layout import MEMORY_FILES, Workspace

_CJK = re.compile(f"[{CJK_CHARS}]")
_LETTER = re.compile(r"[^\W\d_]")

SAMPLE_BYTES = 2_000_000
"""At most this much text is read (newest daily notes and MEMORY.md first): the share, not a census."""


@dataclass(frozen=True)
class ScriptShare:
    cjk: int
    """CJK characters read."""
    letters: int
    """Letters read, CJK characters included."""

    @property
    def cjk_share(self) -> float:
        return self.cjk / self.letters if self.letters else 0.0


def script_share(workspace: Workspace, sample_bytes: int = SAMPLE_BYTES) -> ScriptShare:
    """CJK characters among the letters of the workspace's memory files (sessions left out: they are
    what was said, not what the user keeps)."""
    files = sorted(
        (f for f, _ in workspace.scan() if f.source != "sessions"),
        key=lambda f: (f.path not in MEMORY_FILES, -(f.day.toordinal() if f.day else 0)),
    )
    cjk = letters = read = 0
    for memory_file in files:
        if read >= sample_bytes:
            break
        try:
            data = (workspace.root / memory_file.path).read_bytes()[: sample_bytes - read]
        except OSError:
            continue
        read += len(data)
        text = data.decode("utf-8", errors="ignore")
        cjk += len(_CJK.findall(text))
        letters += len(_LETTER.findall(text))
    return ScriptShare(cjk, letters)

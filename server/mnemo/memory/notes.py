"""What a search or a status says of an index without vectors, or with some still to come; a module of
its own so that a one-shot search (:mod:`mnemo.memory.readonly`) need not load the status types."""

from __future__ import annotations

KEYWORD_ONLY_NOTE = "keyword-only mode: no embedding provider (embedding.provider = none)"
"""What a search of an index built without vectors says (the writer's and the one-shot reader's)."""


def vectors_note(embedded: int, total: int, *, embedding: bool) -> str:
    """What a search or status says while chunks wait for vectors (``embedding``: a thread is at it)."""
    how = "embedding continues in the background" if embedding else "run `mnemo index` to embed them"
    if embedded == 0:
        return f"keyword-only until the vectors are ready: 0 of {total:,} chunks embedded; {how}"
    return (
        f"hybrid, {embedded:,} of {total:,} chunks embedded; the other {total - embedded:,} are "
        f"searched by keyword; {how}"
    )

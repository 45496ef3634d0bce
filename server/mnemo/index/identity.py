"""What an index file records about how it was built (its ``meta`` rows), readable without the engine's
heavier modules: a one-shot reader (:mod:`mnemo.index.snapshot`) checks it before anything else loads."""

from __future__ import annotations

from mnemo.config import ChunkingSettings
from mnemo.index import INDEX_FILE  # noqa: F401  (re-exported: its older home)
from mnemo.index.api import IndexIdentity
from mnemo.markdown.version import CHUNKER_VERSION
from mnemo.text.terms import TERMS_VERSION

SCHEMA_VERSION = "4"


def chunker_id(chunking: ChunkingSettings) -> str:
    """The chunker an index records: a change of version, tokenizer or settings means other chunks."""
    return f"{CHUNKER_VERSION}/{TERMS_VERSION}/{chunking.target_tokens}/{chunking.overlap}"


def identity_meta(identity: IndexIdentity) -> dict[str, str]:
    """The ``meta`` rows that record what an index file was built with."""
    return {
        "schema_version": SCHEMA_VERSION,
        "provider": identity.provider,
        "model": identity.model,
        "dims": str(identity.dims),
        "chunker": identity.chunker,
    }


def identity_from(meta: dict[str, str]) -> IndexIdentity | None:
    """The identity of a complete index of this schema, else None."""
    if meta.get("schema_version") != SCHEMA_VERSION or meta.get("complete") != "1":
        return None
    try:
        return IndexIdentity(meta["provider"], meta["model"], int(meta["dims"]), meta["chunker"])
    except (KeyError, ValueError):
        return None


def describe(identity: IndexIdentity) -> str:
    """The embedder an index was built with, as messages name it."""
    return "none" if identity.provider == "none" else f"{identity.provider}/{identity.model}"


def mismatch_message(have: IndexIdentity, want: IndexIdentity) -> str:
    """Why an index built as ``have`` is read as it is by a process that would build ``want`` (they
    differ), and the command that rebuilds it."""
    if (have.provider, have.model, have.dims) != (want.provider, want.model, want.dims):
        return (
            f"index built with {describe(have)}; searching keyword-only; "
            f"run `mnemo index` to rebuild for {describe(want)}"
        )
    return "index built with other chunking settings; edits are not indexed until `mnemo index` rebuilds it"

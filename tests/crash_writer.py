"""Crash rounds: a writer process indexing a workspace is SIGKILLed at a random moment, then checked.

The writer (``python -m tests.crash_writer ROOT MODE``, run by :func:`spawn_writer`) is the memory
engine as the editor's server drives it, with the deterministic HashEmbedder (64-dim vectors, so the
HNSW index is in play): a sync at start, then until it is killed, buffer edits applied at once
(``schedule_buffer`` + ``apply_pending``, the ``didChange`` path), buffers closed (re-read from disk),
searches with their retrieval statistics, plain syncs and, now and then, a full rebuild. It prints
``ready`` after its first sync and ``commit N`` after each write. MODE ``edits`` only edits buffers.

:func:`crash_round` is one round as tests/unit/test_crash.py and benchmarks/bench_crash.py run it:
edit Markdown on disk (as a user would), start the writer, kill it after a random delay, then check
that the Markdown is untouched, that the index opens (repairing what the kill damaged), that a sync
brings it in step with the disk, that ``status`` counts equal the rows and the fts tables agree
(``check_consistent``), and that hybrid search finds a file by its unique word.
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTES = 30
DIMS = 64
"""HashEmbedder vectors: wide enough that unrelated short notes rarely collide."""


def embedder():  # type: ignore[no-untyped-def]
    from tests.conftest import HashEmbedder

    return HashEmbedder(dims=DIMS)


def word(prefix: str, n: int) -> str:
    """A word found in one file only: letters, no digits (``marker7`` would also match "item 7"), and
    an ending the Porter stemmer leaves alone (``markers`` and ``markere`` both stem to ``marker``)."""
    letters = ""
    while True:
        n, digit = divmod(n, 26)
        letters = chr(ord("a") + digit) + letters
        if n == 0:
            return prefix + letters + "qz"


def note_text(n: int, extra: str = "") -> str:
    return (
        f"# Note {n}\n\nThis note is about {word('marker', n)} and the shared lighthouse.\n\n"
        f"## Detail\n\nMore about item {n}: calibration, inventory and review.\n{extra}"
    )


def make_workspace(root: Path) -> None:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- The billing service uses PostgreSQL.\n", encoding="utf-8")
    for n in range(NOTES):
        (root / "memory" / f"note-{n:02d}.md").write_text(note_text(n), encoding="utf-8")


@contextlib.contextmanager
def vector_index(hnsw: bool) -> Iterator[None]:
    """With ``hnsw``, the index keeps an HNSW index at any size (as a large workspace does); without,
    the default for these few notes: vectors searched in memory, no HNSW index."""
    from mnemo.index import pending

    before = pending.EXACT_SEARCH_BYTES
    if hnsw:
        pending.EXACT_SEARCH_BYTES = 0
    try:
        yield
    finally:
        pending.EXACT_SEARCH_BYTES = before


def spawn_writer(root: Path, mode: str = "mixed", *, hnsw: bool = True) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "server"), str(ROOT)])}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash_writer", str(root), mode, "hnsw" if hnsw else "exact"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()


def user_edits(root: Path, rng: random.Random, round_no: int) -> None:
    """What a user does between two crashes: append to notes, add one, sometimes delete one."""
    notes = sorted((root / "memory").glob("note-*.md"))
    for path in rng.sample(notes, k=min(2, len(notes))):
        with path.open("a", encoding="utf-8") as f:
            f.write(f"\n## Round {round_no}\n\nappended in round {round_no}: token{rng.randrange(10**6)}\n")
    (root / "memory" / f"extra-{round_no:03d}.md").write_text(
        f"# Extra {round_no}\n\n{word('roundword', round_no)} lives here.\n", encoding="utf-8"
    )
    extras = sorted((root / "memory").glob("extra-*.md"))
    if len(extras) > 3 and rng.random() < 0.5:
        extras[0].unlink()


@dataclass
class RoundResult:
    killed_after_s: float
    had_log: bool
    """A write-ahead log was left (the kill interrupted writing, or the writer never closed)."""
    old_open_failed: bool
    """Opening the killed index the way mnemo did before the repair failed (real HNSW damage)."""
    recovery_s: float
    files: int
    chunks: int


def old_open_fails(index: Path, scratch: Path) -> bool:
    """Open a copy of the killed index with vss and use its HNSW index, as mnemo did before it repaired
    on open: True when DuckDB fails (e.g. "Failed to add to the HNSW index: Duplicate keys")."""
    import duckdb

    from mnemo.index.duck import connect

    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for name in (index.name, index.name + ".wal"):
        if (index.parent / name).exists():
            shutil.copy(index.parent / name, scratch / name)
    vector = ", ".join(["1.0"] + ["0.0"] * (DIMS - 1))
    con = None
    try:
        con = connect(scratch / index.name)
        con.execute(
            f"SELECT id FROM chunks ORDER BY array_cosine_distance(embedding, [{vector}]::FLOAT[{DIMS}]) LIMIT 3"
        ).fetchall()
        return False
    except duckdb.Error:
        return True
    finally:
        if con is not None:
            con.close()
        shutil.rmtree(scratch, ignore_errors=True)


def crash_round(
    root: Path, rng: random.Random, round_no: int, *, max_delay_s: float = 2.5, hnsw: bool = True
) -> RoundResult:
    with vector_index(hnsw):
        return _crash_round(root, rng, round_no, max_delay_s, hnsw)


def _crash_round(
    root: Path, rng: random.Random, round_no: int, max_delay_s: float, hnsw: bool
) -> RoundResult:
    from mnemo.config import load_settings
    from mnemo.memory.service import MemoryService
    from mnemo.workspace.layout import Workspace
    from tests.conftest import check_consistent, markdown_hashes

    user_edits(root, rng, round_no)
    before = markdown_hashes(root)
    proc = spawn_writer(root, hnsw=hnsw)
    delay = rng.uniform(0.2, max_delay_s)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 120)  # start-up under load: not part of the delay
    assert ready and proc.stdout.readline().strip() == "started", "the writer did not start"
    time.sleep(delay)
    kill(proc)
    assert markdown_hashes(root) == before, "the writer changed Markdown"
    index = root / ".mnemo" / "index.duckdb"
    had_log = index.with_name(index.name + ".wal").exists()
    damaged = index.exists() and had_log and old_open_fails(index, root.parent / "scratch")

    started = time.perf_counter()
    settings, problems = load_settings(root)
    workspace = Workspace(root, ignore=[*settings.index.ignore, settings.index.dir])
    memory = MemoryService(workspace, settings, embedder(), problems)
    try:
        memory.sync()
        recovery = time.perf_counter() - started
        store = memory.indexer.store
        assert store is not None and not memory.indexer.foreign
        counts = check_consistent(store.con)
        status = memory.status()
        assert (status.files, status.chunks) == (counts["files"], counts["chunks"])
        on_disk = 1 + len(list((root / "memory").glob("*.md")))
        assert counts["files"] == on_disk, f"{counts['files']} files indexed, {on_disk} on disk"
        n = rng.randrange(NOTES)
        outcome = memory.search(word("marker", n))
        assert outcome.mode == "hybrid" and outcome.results, outcome.notes
        # The keyword part is exact; hashed 64-dim vectors may still rank a short unrelated note high.
        best = max(outcome.results, key=lambda h: h.parts.text)
        assert best.path == f"memory/note-{n:02d}.md", [(h.path, h.parts.text) for h in outcome.results]
        extra = memory.search(word("roundword", round_no), min_score=0.0).results
        assert max(extra, key=lambda h: h.parts.text).path == f"memory/extra-{round_no:03d}.md"
    finally:
        memory.close()
    assert markdown_hashes(root) == before
    return RoundResult(delay, had_log, damaged, recovery, counts["files"], counts["chunks"])


def _write_forever(root: Path, mode: str) -> None:
    from mnemo.config import load_settings
    from mnemo.memory.service import MemoryService
    from mnemo.workspace.layout import Workspace

    print("started", flush=True)  # imports done: the kill delay counts from here, whatever the load
    settings, problems = load_settings(root)
    workspace = Workspace(root, ignore=[*settings.index.ignore, settings.index.dir])
    memory = MemoryService(workspace, settings, embedder(), problems)
    memory.sync()
    print("ready", flush=True)
    rng = random.Random()
    paths = sorted(p.relative_to(root).as_posix() for p in (root / "memory").glob("*.md"))
    step = 0
    while True:
        step += 1
        rel = rng.choice(paths)
        action = "edit" if mode == "edits" else rng.choice(["edit"] * 6 + ["close", "search", "sync", "full"])
        if action == "edit":
            text = (root / rel).read_text(encoding="utf-8") + f"\n## Edit {step}\n\nedited text {step}\n"
            memory.schedule_buffer(rel, text, delay_s=3600)
            memory.apply_pending()
        elif action == "close":
            memory.schedule_buffer(rel, None, delay_s=3600)
            memory.apply_pending()
        elif action == "search":
            memory.search(word("marker", rng.randrange(NOTES)))
            memory.flush_retrievals()
        elif action == "sync":
            memory.sync()
        elif rng.random() < 0.3:  # a full rebuild now and then: a building file swapped in
            memory.sync(full=True)
        print("commit", step, flush=True)


if __name__ == "__main__":
    with vector_index(len(sys.argv) <= 3 or sys.argv[3] == "hnsw"):
        _write_forever(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "mixed")

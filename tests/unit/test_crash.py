"""SIGKILL the index writer at random moments, round after round: the index always comes back.

Each round (tests/crash_writer.py): edit Markdown, start a writer process (syncs, buffer edits, searches,
full rebuilds), kill it after 0.2-2.5 s, then search works, status counts equal the rows, the fts tables
agree, and no Markdown changed. ``MNEMO_CRASH_ROUNDS`` sets the rounds (8 here; 50 in
benchmarks/bench_crash.py).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.crash_writer import crash_round, make_workspace

ROUNDS = int(os.environ.get("MNEMO_CRASH_ROUNDS", "8"))


def test_writer_killed_at_random_moments(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    make_workspace(root)
    rng = random.Random(int(os.environ.get("MNEMO_CRASH_SEED", "13")))
    # Even rounds keep an HNSW index (a large workspace: the damage a kill can do to it is repaired),
    # odd ones the default for a workspace this small (vectors searched in memory, no HNSW index).
    results = [crash_round(root, rng, i, hnsw=i % 2 == 0) for i in range(ROUNDS)]
    # The kills did interrupt writing (a log was left behind) in some rounds, not only idle moments.
    assert sum(r.had_log for r in results) >= min(2, ROUNDS)

"""The crash test at length: SIGKILL the index writer at random moments, N rounds (default 50).

Each round is tests/crash_writer.py's ``crash_round``: edit Markdown on disk, start a writer process (the
memory engine as the editor's server drives it, HashEmbedder vectors so the HNSW index is in play:
syncs, buffer edits, searches, full rebuilds), SIGKILL it after a random 0.2-``--max-delay`` s, then
check that no Markdown changed, the index opens (repairing crash damage), a sync brings it in step,
``status`` counts equal the rows and the fts tables, and hybrid search finds a file by its word. Any
failed check stops the run with the round's number.

The table says in how many rounds the kill left a write-ahead log, in how many opening the killed file
the way mnemo did before it repaired on open failed for real (``Failed to add to the HNSW index:
Duplicate keys``), and how long opening + the first sync took after a kill.

    python benchmarks/bench_crash.py
    python benchmarks/bench_crash.py --rounds 10 --seed 7
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "server"))  # after PYTHONPATH: a tree given there is the one measured

from tests.crash_writer import crash_round, make_workspace  # noqa: E402

from benchmarks.common import command_line, machine, machine_line, md_table, percentile, write_outputs  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--max-delay", type=float, default=2.5, help="longest wait before the kill (s)")
    args = parser.parse_args()
    m = machine()
    rng = random.Random(args.seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mnemo-crash-") as tmp:
        root = Path(tmp) / "ws"
        make_workspace(root)
        results = []
        for i in range(args.rounds):
            try:
                results.append(crash_round(root, rng, i, max_delay_s=args.max_delay))
            except AssertionError as exc:
                print(f"round {i}: FAILED: {exc}", file=sys.stderr)
                raise
            print(f"round {i + 1}/{args.rounds} ok ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    total = time.perf_counter() - started
    recovery = [r.recovery_s for r in results]
    row = [
        len(results),
        sum(r.had_log for r in results),
        sum(r.old_open_failed for r in results),
        percentile(recovery, 50),
        max(recovery),
        results[-1].files,
        results[-1].chunks,
        total,
    ]
    headers = [
        "rounds passed",
        "kills leaving a log",
        "old open failed (HNSW damage)",
        "open+sync p50 s",
        "max s",
        "files",
        "chunks",
        "total s",
    ]
    markdown = "\n".join([f"`{command_line()}`", "", machine_line(m), "", md_table(headers, [row])])
    write_outputs("crash", {"machine": m, "rounds": [asdict(r) for r in results], "total_s": total}, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The CPU of a sync that finds little to do: what an editor's save and each search through a daemon pay.

    python benchmarks/bench_sync.py [--files 2000] [--syncs 100] [--rounds 3]
    PYTHONPATH=DIR/server python benchmarks/bench_sync.py   # another tree (e.g. `git archive REV server`)

A synthetic English workspace of ``--files`` notes (benchmarks/synthetic.py) is indexed in keyword mode,
in this process, by the writer's services (as `mnemo serve` holds them). Then, round after round:
``--syncs`` syncs with nothing changed on disk, and as many with one note rewritten before each (its
chunks indexed again, the rest compared with the disk). CPU is this process's (user + system, all
threads), per sync; the medians of the rounds are printed, with each round's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.synthetic import generate


def per_sync_ms(syncs: int, before_each: Callable[[int], None], sync: Callable[[], object]) -> float:
    """CPU milliseconds per ``sync()``, ``before_each(i)`` run first each time (not counted)."""
    spent = 0.0
    for i in range(syncs):
        before_each(i)
        start = time.process_time()
        sync()
        spent += time.process_time() - start
    return 1000 * spent / syncs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=2000, help="synthetic English notes (default 2000)")
    parser.add_argument("--syncs", type=int, default=100, help="syncs of each kind a round (default 100)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from mnemo.services import build_services

    with tempfile.TemporaryDirectory(prefix="mnemo-bench-sync-") as tmp:
        ws = Path(tmp) / "ws"
        generate(args.files, write_to=ws)
        (ws / "mnemo.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
        services = build_services(ws)
        try:
            memory = services.memory
            memory.sync()
            note = sorted((ws / "memory").glob("*.md"))[0]
            text = note.read_text(encoding="utf-8")

            def rewrite(i: int) -> None:
                note.write_text(f"{text}\nedit {i}\n", encoding="utf-8")

            unchanged, one_changed = [], []
            for _ in range(args.rounds):
                unchanged.append(per_sync_ms(args.syncs, lambda i: None, memory.sync))
                one_changed.append(per_sync_ms(args.syncs, rewrite, memory.sync))
        finally:
            services.close()
    rounds = lambda values: ", ".join(f"{v:.1f}" for v in values)  # noqa: E731
    print(
        f"`python benchmarks/bench_sync.py --files {args.files} --syncs {args.syncs} --rounds {args.rounds}`"
    )
    print(f"load (1/5/15 min) at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"sync, nothing changed: {statistics.median(unchanged):.1f} ms of CPU ({rounds(unchanged)})")
    print(f"sync, one note changed: {statistics.median(one_changed):.1f} ms of CPU ({rounds(one_changed)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The CPU of a sync that finds little to do: what an editor's save and each search through a daemon pay.

    python benchmarks/bench_sync.py [--files 2000] [--syncs 100] [--pull 300] [--rounds 3]
    PYTHONPATH=DIR/server python benchmarks/bench_sync.py   # another tree (e.g. `git archive REV server`)

A synthetic English workspace of ``--files`` notes (benchmarks/synthetic.py) is indexed in keyword mode,
in this process, by the writer's services (as `mnemo serve` holds them). Then, round after round:
``--syncs`` syncs with nothing changed on disk, and as many with one note rewritten before each (its
chunks indexed again, the rest compared with the disk), and one sync after ``--pull`` notes were
rewritten at once (a pull). CPU is this process's (user + system, all threads), per sync; the table (benchmarks/out/bench_sync.md and .json) gives the median of the rounds
and each round's, under the machine (CPU model, cores, load) and the command.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import command_line, cpu_seconds, machine, machine_line, md_table, write_outputs
from benchmarks.synthetic import generate


def per_sync_ms(syncs: int, before_each: Callable[[int], None], sync: Callable[[], object]) -> float:
    """CPU milliseconds per ``sync()``, ``before_each(i)`` run first each time (not counted)."""
    spent = 0.0
    for i in range(syncs):
        before_each(i)
        start = cpu_seconds()
        sync()
        spent += cpu_seconds() - start
    return 1000 * spent / syncs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=2000, help="synthetic English notes (default 2000)")
    parser.add_argument("--syncs", type=int, default=100, help="syncs of each kind a round (default 100)")
    parser.add_argument("--pull", type=int, default=300, help="notes a pull rewrites (default 300)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    args = parser.parse_args(argv)
    started_on = machine()  # (the load before the run)
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

            pulled = sorted((ws / "memory").glob("*.md"))[1 : 1 + args.pull]
            texts = {path: path.read_text(encoding="utf-8") for path in pulled}

            def pull(i: int) -> None:
                for path in pulled:
                    path.write_text(f"{texts[path]}\npulled {i}\n", encoding="utf-8")

            unchanged, one_changed, pulls = [], [], []
            for r in range(args.rounds):
                unchanged.append(per_sync_ms(args.syncs, lambda i: None, memory.sync))
                one_changed.append(per_sync_ms(args.syncs, rewrite, memory.sync))
                pulls.append(per_sync_ms(1, lambda i, r=r: pull(r), memory.sync))  # type: ignore[misc]
        finally:
            services.close()
    rows = [
        [kind, statistics.median(values), ", ".join(f"{v:.1f}" for v in values)]
        for kind, values in (
            ("nothing changed", unchanged),
            ("one note rewritten", one_changed),
            (f"{args.pull} notes rewritten (a pull)", pulls),
        )
    ]
    table = md_table(["sync", "CPU ms, median", "each round"], rows)
    markdown = f"`{command_line()}`\n\n{machine_line(started_on)}\n\n{table}"
    write_outputs(
        "bench_sync",
        {"args": vars(args), "unchanged_ms": unchanged, "one_changed_ms": one_changed, "pull_ms": pulls},
        markdown,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

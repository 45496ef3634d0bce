"""What notes indexed right after they were written cost the command line (racily clean files).

    python benchmarks/bench_racy.py [--files 2000] [--searches 5]

A file read less than two seconds after its mtime is recorded *unsettled* (mnemo.index.racy): a
same-size write in the same clock tick must not go unseen, so its content is compared until a writer
records its mtime. This writes ``--files`` synthetic English notes, runs `mnemo index` at once (every
file unsettled), ``--searches`` one-shot keyword searches, waits until the files have settled, runs
`mnemo index` again (it records their mtimes) and the same searches. CPU is each command's (user +
system); the table (benchmarks/out/bench_racy.md and .json) gives the medians, under the machine (CPU
model, cores, load) and the command.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import command_line, machine, machine_line, md_table, write_outputs
from benchmarks.synthetic import generate


def run_cpu(argv: list[str]) -> float:
    """CPU seconds of one `python -m mnemo ARGV` (it must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "mnemo", *argv], capture_output=True, check=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def unsettled_rows(ws: Path) -> int:
    import duckdb

    con = duckdb.connect(str(ws / ".mnemo" / "index.duckdb"), read_only=True)
    try:
        row = con.execute("SELECT count(*) FROM files WHERE mtime = -1").fetchone()
    finally:
        con.close()
    return int(row[0]) if row else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=2000, help="synthetic English notes (default 2000)")
    parser.add_argument("--searches", type=int, default=5, help="one-shot searches each way (default 5)")
    args = parser.parse_args(argv)
    started_on = machine()  # (the load before the run)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-racy-") as tmp:
        ws = Path(tmp) / "ws"
        spec = generate(args.files, "en", write_to=ws)
        (ws / "mnemo.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
        search = ["search", "--json", "-w", str(ws), spec.needles[0].query]
        first_index = run_cpu(["index", "-w", str(ws)])
        unsettled = unsettled_rows(ws)
        before = [run_cpu(search) for _ in range(args.searches)]
        time.sleep(2.5)
        settling_index = run_cpu(["index", "-w", str(ws)])
        left = unsettled_rows(ws)
        after = [run_cpu(search) for _ in range(args.searches)]
        noop_index = run_cpu(["index", "-w", str(ws)])
    rows = [
        ["files recorded unsettled", unsettled, left],
        ["one-shot keyword search, CPU s (median)", statistics.median(before), statistics.median(after)],
        ["`mnemo index`, CPU s", f"{settling_index:.3f} (records the mtimes)", f"{noop_index:.3f} (no-op)"],
    ]
    table = md_table(["", "right after the first index", "after the settling index"], rows)
    markdown = (
        f"`{command_line()}`\n\n{machine_line(started_on)}\n\nfirst index: {first_index:.3f} s CPU\n\n{table}"
    )
    data = {
        "args": vars(args),
        "first_index_s": first_index,
        "unsettled": [unsettled, left],
        "search_unsettled_s": before,
        "search_settled_s": after,
        "settling_index_s": settling_index,
        "noop_index_s": noop_index,
    }
    write_outputs("bench_racy", data, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

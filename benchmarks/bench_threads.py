"""Local embedding throughput against llama.cpp threads and the load on the machine.

Embeds a fixed list of chunk-sized texts (the chunks of a synthetic workspace, benchmarks/synthetic.py) with the
real local model (all-MiniLM-L6-v2 through llama.cpp, as ``mnemo index`` does), one text per call, once for each
thread count in ``--threads``, first on the machine as it is ("quiet") and then with ``--busy`` busy-loop child
processes running (``python -c 'while 1: pass'``, default twice the cores; they are killed at the end, also on
Ctrl-C). Each measurement stops after ``--texts`` texts or ``--seconds`` seconds, whichever comes first, so a
collapsed setting cannot make the run long. Thread counts are interleaved and repeated ``--repeats`` times; the
table gives the median chunks/s (min-max), the process CPU seconds per chunk (more CPU per chunk than at 1
thread is time spent spinning), and ``/proc/loadavg`` read just before each measurement (the one-minute load
and the runnable tasks at that instant). The cores are usually shared with other work, so read the load
column with the figures. ``default`` is the thread count mnemo picks at that moment
(``mnemo.embeddings.threads.default_threads``).

    python benchmarks/bench_threads.py
    python benchmarks/bench_threads.py --threads 1,2 --busy 4 --repeats 3 --texts 60 --seconds 12
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "server"))  # after PYTHONPATH: a tree given there is the one measured

from benchmarks.common import command_line, cpu_seconds, machine, machine_line, md_table, write_outputs  # noqa: E402
from benchmarks.synthetic import generate  # noqa: E402

_children: list[subprocess.Popen[bytes]] = []


def chunk_texts(count: int, min_tokens: int, seed: int) -> list[str]:
    """``count`` chunk-sized texts: the chunks of a synthetic English workspace, at least ``min_tokens``."""
    from mnemo.markdown.chunker import approx_tokens, chunk_markdown

    spec = generate(max(40, count), "en", seed)
    texts: list[str] = []
    for rel in sorted(spec.files):
        for chunk in chunk_markdown(rel, spec.files[rel]):
            if approx_tokens(chunk.text) >= min_tokens:
                texts.append(chunk.text)
    if len(texts) < count:
        raise SystemExit(f"only {len(texts)} chunks of >= {min_tokens} tokens; lower --min-tokens")
    return texts[:count]


def read_loadavg() -> tuple[float, str]:
    """(one-minute load, runnable/total tasks) from /proc/loadavg."""
    try:
        fields = Path("/proc/loadavg").read_text().split()
        return float(fields[0]), fields[3]
    except (OSError, IndexError, ValueError):
        return float("nan"), "?"


def start_busy(n: int) -> None:
    for _ in range(n):
        _children.append(subprocess.Popen([sys.executable, "-c", "while 1: pass"]))


def stop_busy() -> None:
    while _children:
        child = _children.pop()
        child.kill()
        child.wait()


def _on_signal(signum: int, frame: Any) -> None:
    stop_busy()
    raise SystemExit(128 + signum)


def measure(embedder: Any, texts: list[str], seconds: float) -> dict[str, Any]:
    """Embed ``texts`` one per call until all are done or ``seconds`` have passed."""
    load1, runnable = read_loadavg()
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    done = 0
    for text in texts:
        embedder.embed([text])
        done += 1
        if time.perf_counter() - t0 >= seconds:
            break
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    return {
        "chunks": done,
        "wall_s": round(wall, 3),
        "chunks_per_s": done / wall,
        "cpu_s_per_chunk": cpu / done,
        "load1": load1,
        "runnable": runnable,
    }


def run_phase(
    name: str, embedders: dict[int, Any], texts: list[str], args: argparse.Namespace
) -> dict[int, list[dict[str, Any]]]:
    from mnemo.embeddings.threads import default_threads

    results: dict[int, list[dict[str, Any]]] = {n: [] for n in embedders}
    for rep in range(args.repeats):
        for n, embedder in embedders.items():
            m = measure(embedder, texts, args.seconds)
            m["default_threads"] = default_threads()
            results[n].append(m)
            print(
                f"[{name} {rep + 1}/{args.repeats}] threads={n}: {m['chunks_per_s']:.2f} chunks/s "
                f"({m['chunks']} in {m['wall_s']:.1f} s, {m['cpu_s_per_chunk']:.3f} cpu s/chunk), "
                f"load {m['load1']:.2f}, runnable {m['runnable']}, default_threads() {m['default_threads']}",
                file=sys.stderr,
                flush=True,
            )
    return results


def summary_rows(phase: str, results: dict[int, list[dict[str, Any]]]) -> list[list[Any]]:
    rows = []
    for n, ms in results.items():
        rates = [m["chunks_per_s"] for m in ms]
        loads = [m["load1"] for m in ms]
        rows.append(
            [
                phase,
                n,
                round(statistics.median(rates), 2),
                f"{min(rates):.2f}–{max(rates):.2f}",
                round(statistics.median(m["cpu_s_per_chunk"] for m in ms), 3),
                f"{statistics.median(loads):.2f} ({min(loads):.2f}–{max(loads):.2f})",
                " ".join(m["runnable"] for m in ms),
                " ".join(str(m["default_threads"]) for m in ms),
            ]
        )
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    cores = len(os.sched_getaffinity(0))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--threads",
        default=",".join(str(n) for n in sorted({1, 2, cores})),
        help="comma-separated llama.cpp thread counts (default 1,2,<cores>)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=2 * cores,
        help=f"busy-loop processes in the loaded phase (default {2 * cores})",
    )
    parser.add_argument("--texts", type=int, default=60, help="texts per measurement at most (default 60)")
    parser.add_argument(
        "--seconds", type=float, default=12.0, help="seconds per measurement at most (default 12)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="measurements per setting and phase (default 3)"
    )
    parser.add_argument(
        "--settle", type=float, default=20.0, help="seconds of busy load before the loaded phase (default 20)"
    )
    parser.add_argument(
        "--min-tokens", type=int, default=120, help="shortest text, approx. tokens (default 120)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-quiet", action="store_true", help="measure only under the busy load")
    parser.add_argument(
        "--name", default="threads", help="output name under benchmarks/out/ (default threads)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from mnemo.embeddings.base import default_cache_dir
    from mnemo.embeddings.local import LocalEmbedder

    info = machine()
    texts = chunk_texts(args.texts, args.min_tokens, args.seed)
    models_dir = default_cache_dir(None) / "models"
    counts = sorted({int(n) for n in args.threads.split(",") if n.strip()})
    embedders = {n: LocalEmbedder(None, models_dir, threads=n) for n in counts}
    for embedder in embedders.values():
        embedder.embed(texts[:2])  # load and warm up
    atexit.register(stop_busy)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    phases: dict[str, dict[int, list[dict[str, Any]]]] = {}
    if not args.skip_quiet:
        phases["no added load"] = run_phase("no added load", embedders, texts, args)
    busy = f"+{args.busy} busy"
    try:
        start_busy(args.busy)
        time.sleep(args.settle)
        phases[busy] = run_phase(busy, embedders, texts, args)
    finally:
        stop_busy()
    rows = [row for phase, res in phases.items() for row in summary_rows(phase, res)]
    headers = [
        "phase",
        "threads",
        "chunks/s (median)",
        "min–max",
        "CPU s/chunk",
        "load1 before (median, range)",
        "runnable/total",
        "default_threads()",
    ]
    tokens = sum(len(t) for t in texts) / len(texts) / 4
    markdown = "\n".join(
        [
            f"`{command_line()}`",
            "",
            md_table(headers, rows),
            "",
            f"{len(texts)} texts of ~{tokens:.0f} tokens on average (approx.), one per call; "
            f"{args.repeats} measurements each, at most {args.seconds:g} s or {args.texts} texts.",
            machine_line(info),
        ]
    )
    data = {
        "machine": info,
        "args": vars(args),
        "phases": {p: {str(n): r for n, r in res.items()} for p, res in phases.items()},
    }
    write_outputs(args.name, data, markdown)
    for embedder in embedders.values():
        embedder.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Time to first search vs time to all vectors on a new synthetic workspace (issue 19, point 1).

The memory engine as the editor's server drives it: the embedding thread is started, a sync commits the
keyword side and returns, the first search is timed, then the background embedding of every chunk
(newest and evergreen notes first). Each size gets a fresh workspace and index; the embedding cache is
empty, so every chunk goes through the model.

    python benchmarks/bench_first_search.py --files 200 1000 [--provider local] [--max-wait 900]
    python benchmarks/bench_first_search.py --files 100 1000 10000 --max-wait 600 --plot docs/images/time_to_search.png

``--max-wait`` stops waiting for the vectors after that many seconds; the time to all vectors is then
estimated from the rate so far (marked ``estimated`` and drawn hollow in the plot). ``--plot`` draws
time to first search and time to all vectors against the workspace size (matplotlib, a dev dependency);
the results also go to ``benchmarks/out/first-search.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.synthetic import generate


def run(files: int, provider: str, max_wait_s: float) -> dict[str, float | int | str]:
    from mnemo.services import build_services

    root = Path(tempfile.mkdtemp(prefix=f"mnemo-first-{files}-"))
    try:
        spec = generate(files, "en", write_to=root)
        (root / "mnemo.toml").write_text(f'[embedding]\nprovider = "{provider}"\n', encoding="utf-8")
        started = time.perf_counter()
        services = build_services(root)
        memory = services.memory
        try:
            memory.embed_in_background()
            report = memory.sync()
            keyword_s = time.perf_counter() - started
            needle = spec.needles[0] if spec.needles else None
            outcome = memory.search(needle.query if needle else "billing")
            first_search_s = time.perf_counter() - started
            embedded, total = memory.vector_counts()
            deadline = started + max_wait_s
            while not memory.vectors.thread.wait_idle(1.0):
                if time.perf_counter() > deadline:
                    break
            all_s = time.perf_counter() - started
            embedded_end, total = memory.vector_counts()
            rate = (embedded_end - embedded) / max(1e-9, all_s - first_search_s)
            estimated = embedded_end < total and rate > 0
            if estimated:  # stopped waiting: the rest at the rate so far (none without a model)
                all_s += (total - embedded_end) / max(rate, 1e-9)
            return {
                "files": files,
                "chunks": total,
                "keyword_s": round(keyword_s, 2),
                "first_search_s": round(first_search_s, 2),
                "first_mode": outcome.mode,
                "embedded_at_first_search": embedded,
                "embedded": embedded_end,
                "vectors_s": round(all_s, 1),
                "vectors_estimated": estimated,
                "chunks_per_s": round(rate, 1),
                "pending_at_sync": report.chunks_pending,
            }
        finally:
            services.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def plot(results: list[dict[str, float | int | str]], path: Path, loads: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = [int(r["files"]) for r in results]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(files, [float(r["first_search_s"]) for r in results], "o-", label="first search answered")
    ax.plot(files, [float(r["vectors_s"]) for r in results], "s--", label="every chunk embedded")
    for r in results:
        if r.get("vectors_estimated"):
            ax.plot([int(r["files"])], [float(r["vectors_s"])], "s", mfc="white", mec="C1", ms=10)
            ax.annotate(
                "estimated",
                (int(r["files"]), float(r["vectors_s"])),
                textcoords="offset points",
                xytext=(-60, 6),
            )
    for r in results:
        ax.annotate(
            f"{int(r['chunks']):,} chunks",
            (int(r["files"]), float(r["first_search_s"])),
            textcoords="offset points",
            xytext=(4, -14),
            fontsize=8,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("notes in a new workspace")
    ax.set_ylabel("seconds from the start of indexing")
    ax.set_title("Searchable first, vectors after (local MiniLM, 2 shared cores)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.text(0.01, 0.01, f"load average during the runs: {loads}", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--provider", default="local")
    parser.add_argument("--max-wait", type=float, default=1800.0)
    parser.add_argument("--plot", type=Path, help="draw the results into this PNG")
    args = parser.parse_args(argv)
    load = Path("/proc/loadavg").read_text()
    loads = [load.split()[0]]
    print(f"loadavg before: {load.strip()}")
    results = []
    for files in args.files:
        result = run(files, args.provider, args.max_wait)
        results.append(result)
        print(" ".join(f"{k}={v}" for k, v in result.items()), flush=True)
        load = Path("/proc/loadavg").read_text()
        print(f"loadavg: {load.strip()}", flush=True)
        loads.append(load.split()[0])
    out = Path(__file__).resolve().parent / "out" / "first-search.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"results": results, "loads": loads}, indent=1), encoding="utf-8")
    if args.plot:
        plot(results, args.plot, " -> ".join(loads))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

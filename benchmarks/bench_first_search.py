"""Time to first search vs time to all vectors on a new synthetic workspace (issue 19, point 1).

The memory engine as the editor's server drives it: the embedding thread is started, a sync commits the
keyword side and returns, the first search is timed, then the background embedding of every chunk
(newest and evergreen notes first). Each size gets a fresh workspace and index; the embedding cache is
empty, so every chunk goes through the model.

    python benchmarks/bench_first_search.py --files 200 1000 [--provider local] [--max-wait 900]

``--max-wait`` stops waiting for the vectors after that many seconds and reports the rate so far.
"""

from __future__ import annotations

import argparse
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
            return {
                "files": files,
                "chunks": total,
                "keyword_s": round(keyword_s, 2),
                "first_search_s": round(first_search_s, 2),
                "first_mode": outcome.mode,
                "embedded_at_first_search": embedded,
                "embedded": embedded_end,
                "vectors_s": round(all_s, 1),
                "chunks_per_s": round((embedded_end - embedded) / max(1e-9, all_s - first_search_s), 1),
                "pending_at_sync": report.chunks_pending,
            }
        finally:
            services.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--provider", default="local")
    parser.add_argument("--max-wait", type=float, default=1800.0)
    args = parser.parse_args(argv)
    print(f"loadavg before: {Path('/proc/loadavg').read_text().strip()}")
    for files in args.files:
        result = run(files, args.provider, args.max_wait)
        print(" ".join(f"{k}={v}" for k, v in result.items()), flush=True)
        print(f"loadavg: {Path('/proc/loadavg').read_text().strip()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How long the local model takes to embed a search query, from the calling thread and from a thread pool.

    python benchmarks/bench_query_embed.py [--queries 60] [--pool 6]
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_query_embed.py   # threads sleeping at every barrier

Embeds ``deploy staging <i>`` (a 6-token query, never the same text twice) with mnemo's LocalEmbedder and
the default all-MiniLM-L6-v2, first from this thread, then from a pool of ``--pool`` threads (as the
language server's searches arrive, on asyncio's pool); medians after five warm-up calls. A user's
``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is left as set (mnemo sets ``GOMP_SPINCOUNT=1000`` otherwise);
``PYTHONPATH`` on another tree's ``server`` measures that tree.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _median_ms(
    call: Callable[[Callable[[], object]], object], embed: Callable[[str], object], n: int, tag: str
) -> float:
    times = []
    for i in range(n + 5):
        text = f"deploy staging {i} {tag}"
        started = time.perf_counter()
        call(lambda text=text: embed(text))
        times.append(1000 * (time.perf_counter() - started))
    return statistics.median(times[5:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--pool", type=int, default=6)
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # (as `mnemo` sets it)
    from mnemo.config import EmbeddingSettings
    from mnemo.embeddings import build_embedder

    with tempfile.TemporaryDirectory() as cache:
        embedder = build_embedder(EmbeddingSettings(provider="local"), cache_dir=Path(cache))
        try:
            embed = lambda text: embedder.embed([text])  # noqa: E731
            embed("warm up")
            here = _median_ms(lambda work: work(), embed, args.queries, "here")
            with ThreadPoolExecutor(args.pool) as pool:
                pooled = _median_ms(lambda work: pool.submit(work).result(), embed, args.queries, "pool")
        finally:
            embedder.close()
    waiting = {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ}
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(f"OpenMP {waiting or 'default'}, load {' '.join(load)}")
    print(
        f"query embedding, median of {args.queries}: this thread {here:.2f} ms, pool of {args.pool} {pooled:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

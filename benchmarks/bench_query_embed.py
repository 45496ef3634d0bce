"""How long the local model takes to embed a search query, from the calling thread and from a thread pool.

    python benchmarks/bench_query_embed.py [--queries 60] [--pool 6]
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_query_embed.py   # threads sleeping at every barrier

Embeds ``deploy staging <i>`` (a 6-token query, never the same text twice) with mnemo's LocalEmbedder and
the default all-MiniLM-L6-v2, first from this thread, then from a pool of ``--pool`` threads (as the
language server's searches arrive, on asyncio's pool); medians after five warm-up calls. Then as a
server's queries come, after 10 ms of work on the calling thread (a search's ranking) or a 2 ms pause (a
round trip), on one thread (what a query of up to ``ONE_THREAD_TOKENS`` tokens gets) and on every thread
the embedder has, for queries of 6, 12, 20 and 28 tokens. A user's
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
from typing import Any

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
            between = _between_queries(embedder, args.queries) if embedder.provider == "local" else []
        finally:
            embedder.close()
    waiting = {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ}
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(f"OpenMP {waiting or 'default'}, load {' '.join(load)}")
    print(
        f"query embedding, median of {args.queries}: this thread {here:.2f} ms, pool of {args.pool} {pooled:.2f} ms"
    )
    if between:
        print(
            "| before each query | tokens | one thread ms (median / mean) | every thread ms (median / mean) |"
        )
        print("|---|---|---|---|")
        for row in between:
            print("| " + " | ".join(row) + " |")
    return 0


def _busy(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def _between_queries(embedder: Any, n: int) -> list[list[str]]:
    """Queries of several lengths on one thread and on every thread, each after some work or a pause
    (the two in turn, so both meet the same machine)."""
    from mnemo.embeddings import local

    words = ["deploy", "staging", "rollout", "database", "billing", "cluster", "kernel", "token", "window"]
    limits = {"one": 10_000, "every": 0}  # ONE_THREAD_TOKENS: every text on one thread, or none
    kept = local.ONE_THREAD_TOKENS
    rows = []
    try:
        for label, before in (
            ("10 ms of work", lambda: _busy(0.010)),
            ("2 ms pause", lambda: time.sleep(0.002)),
        ):
            for tokens in (6, 12, 20, 28):
                times: dict[str, list[float]] = {"one": [], "every": []}
                for i in range(n):
                    text = " ".join(words[(i + j) % len(words)] for j in range(tokens - 3)) + f" q{i}"
                    for mode in ("one", "every") if i % 2 else ("every", "one"):
                        local.ONE_THREAD_TOKENS = limits[mode]
                        before()
                        started = time.perf_counter()
                        embedder.embed([f"{text} {mode}"])
                        times[mode].append(1000 * (time.perf_counter() - started))
                size = len(embedder.token_windows(f"{text} one")[0])
                cells = [
                    f"{statistics.median(times[m]):.2f} / {statistics.mean(times[m]):.2f}" for m in limits
                ]
                rows.append([label, str(size), *cells])
    finally:
        local.ONE_THREAD_TOKENS = kept
    return rows


if __name__ == "__main__":
    raise SystemExit(main())

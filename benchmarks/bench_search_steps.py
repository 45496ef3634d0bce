"""Where a warm hybrid search's time goes, in one process: timers around its steps.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_search_steps.py --workspace WS [--searches 60]
    PYTHONPATH=DIR/server python benchmarks/bench_search_steps.py --workspace WS   # another tree

WS must be indexed with vectors (``mnemo index`` with the local model); it is copied first. The model is
loaded, the index opened and synced, five searches warm the caches, then ``--searches`` new queries
(``deploy staging <i> d``: the query's vector is never cached) run through ``MemoryService.search`` as the
language server calls it, with a timer around each step; medians and means in ms.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import copy_of_index  # noqa: E402

STEPS = {
    "query embedding": ("mnemo.search.query_vectors", "QueryVectors", "vector"),
    "nearest vectors": ("mnemo.index.reader", "DuckReader", "nearest"),
    "keyword top-k (term statistics included)": ("mnemo.index.reader", "DuckReader", "keyword_top"),
    "keyword scores of the vector candidates": ("mnemo.index.reader", "DuckReader", "keyword_scores"),
    "ranking (decay, supersession, lines)": ("mnemo.search.hybrid", "HybridSearcher", "_rank"),
    "the whole search": ("mnemo.memory.service", "MemoryService", "search"),
}


def timed(times: list[float], call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def run(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            times.append(1000 * (time.perf_counter() - started))

    return run


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--searches", type=int, default=60)
    args = parser.parse_args()
    import importlib

    from mnemo.embeddings import prepare
    from mnemo.services import build_services

    tmp, ws = copy_of_index(args.workspace, "mnemo-bench-search-")
    services = build_services(ws)
    times: dict[str, list[float]] = defaultdict(list)
    try:
        prepare(services.memory.embedder)
        services.memory.ensure_open()
        services.memory.sync()
        for i in range(5):
            services.memory.search(f"warm up {i}")
        for label, (module, owner, name) in STEPS.items():
            cls = getattr(importlib.import_module(module), owner)
            setattr(cls, name, timed(times[label], getattr(cls, name)))
        for i in range(args.searches):
            services.memory.search(f"deploy staging {i} d")
    finally:
        services.close()
        shutil.rmtree(tmp, ignore_errors=True)
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(f"{args.searches} searches, load {' '.join(load)}")
    print("| step | calls | median ms | mean ms |")
    print("|---|---|---|---|")
    for label in STEPS:
        values = times[label]
        if values:
            print(
                f"| {label} | {len(values)} | {statistics.median(values):.2f} | {statistics.mean(values):.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

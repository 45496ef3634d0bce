"""Filling pending vectors: CPU, wall time and the index file's size, the model left out.

    python benchmarks/bench_fill.py [--files 2000]
    PYTHONPATH=OTHER/server python benchmarks/bench_fill.py   # another tree, for a before/after

A synthetic English workspace (benchmarks/synthetic.py) is synced keyword side first
(``sync(vectors="later")``), then every pending vector is filled batch by batch through
``indexer.embed_step()`` as the background embedder does, with a fake 384-dimension embedding (a hashed
bag of words: instant, so the figures are the index's work, not a model's). Reported: the keyword
commit's CPU, the fill's CPU and wall time, the batches, and the index file's size after closing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import HashEmbedder  # noqa: E402

from benchmarks.synthetic import generate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args(argv)

    import mnemo
    from mnemo.config import load_settings
    from mnemo.memory.service import MemoryService
    from mnemo.workspace.layout import Workspace

    with tempfile.TemporaryDirectory(prefix="mnemo-bench-fill-") as tmp:
        root = Path(tmp) / "ws"
        generate(args.files, "en", write_to=root)
        (root / "mnemo.toml").write_text('[embedding]\nprovider = "local"\n', encoding="utf-8")
        settings, problems = load_settings(root)
        workspace = Workspace(root, ignore=[*settings.index.ignore, settings.index.dir])
        memory = MemoryService(workspace, settings, HashEmbedder(dims=384), problems)
        cpu, wall = time.process_time(), time.perf_counter()
        report = memory.sync(vectors="later")
        keyword_cpu = time.process_time() - cpu
        cpu, wall = time.process_time(), time.perf_counter()
        batches = 0
        while memory.indexer.embed_step() is not None:
            batches += 1
        fill_cpu, fill_wall = time.process_time() - cpu, time.perf_counter() - wall
        memory.close()
        size = (root / ".mnemo" / "index.duckdb").stat().st_size
    print(f"`python benchmarks/bench_fill.py --files {args.files}` ({Path(mnemo.__file__).parents[1]})")
    print()
    print("| chunks | keyword commit CPU s | fill: batches | CPU s | wall s | index file MB |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {report.chunks_pending:,} | {keyword_cpu:.1f} | {batches} | {fill_cpu:.1f} | {fill_wall:.1f} "
        f"| {size / 1e6:.1f} |"
    )
    with open("/proc/loadavg", encoding="ascii") as load:
        print(f"\nload average after: {' '.join(load.read().split()[:3])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

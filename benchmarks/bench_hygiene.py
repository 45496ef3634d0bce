"""Near-duplicate diagnostics over a whole workspace: the cost of one pass at N files.

python benchmarks/bench_hygiene.py --files 2000 --chunks-per-file 3.6

Synthetic unit vectors (384 dims) stand in for the index's chunk vectors; the pass is what
``EditorService.diagnose_workspace`` runs for near-duplicates (one VectorSpace, one query per file), from
given vectors (:func:`mnemo.index.nearest_across.nearest_across_vectors`; the writer runs the same blocks
on its own matrix). Another tree's pass: run the script with ``PYTHONPATH=DIR/server`` (``git archive REV
server`` in DIR; before 2026-12-02's fifth round, ``VectorSpace(chunks)``).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from mnemo.editor import hygiene


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--chunks-per-file", type=float, default=3.6)
    parser.add_argument("--dims", type=int, default=384)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    total = int(args.files * args.chunks_per_file)
    paths = [f"memory/n{i % args.files:05d}.md" for i in range(total)]
    vectors = rng.standard_normal((total, args.dims)).astype(np.float32)
    text = "x" * 80
    chunks = [hygiene.ChunkVector(p, 1, 2, "h", text, v) for p, v in zip(paths, vectors, strict=True)]
    body = "\n".join([text] * 3)
    cpu, wall = time.process_time(), time.perf_counter()
    of = getattr(hygiene.VectorSpace, "of", hygiene.VectorSpace)  # (a tree before VectorSpace.of)
    space = of(chunks)
    found = sum(len(hygiene.duplicate_problems(p, space, 0.9, body)) for p in sorted(set(paths)))
    print(
        f"{args.files} files, {total} chunks: one pass {time.perf_counter() - wall:.2f} s wall, "
        f"{time.process_time() - cpu:.2f} s CPU, {found} near-duplicates; load {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

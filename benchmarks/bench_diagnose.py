"""One file's hygiene diagnostics, as the editor asks after an edit (``EditorService.diagnose``).

    python benchmarks/bench_diagnose.py --workspace WS [--files 40]
    PYTHONPATH=DIR/server python benchmarks/bench_diagnose.py --workspace WS   # another tree

WS must be indexed with vectors (e.g. ``mnemo index`` with the local model). The first ``--files`` memory
files in path order are diagnosed from the disk after one warm-up call; prints wall and CPU time per
file, the peak of Python's allocations during the run (tracemalloc) and the near-duplicates found. To
compare with a tree before (DIR: ``git archive REV server``; before 8ee7a33 a single file's
near-duplicates came from every chunk's vector), run the same command with ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any


def measure(files: list[str], diagnose: Callable[[str], list[Any]]) -> str:
    diagnose(files[0])
    tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    found = [diagnose(rel) for rel in files]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    duplicates = sum(1 for problems in found for p in problems if p.code == "near-duplicate")
    row = f"| {1000 * wall / len(files):.1f} ms | {1000 * cpu / len(files):.1f} ms | {peak:.1f} MB |"
    return f"{row} {duplicates} |"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--files", type=int, default=40)
    args = parser.parse_args()
    from mnemo.services import build_services

    services = build_services(args.workspace.resolve())
    try:
        services.memory.sync()
        editor = services.editor
        files = sorted(rel for rel in editor.known_files() if editor.is_memory_markdown(rel))[: args.files]
        texts = {rel: (args.workspace / rel).read_text(encoding="utf-8") for rel in files}
        known = editor.known_files()
        print(f"{len(files)} files of {len(known)}")
        print("| wall a file | CPU a file | Python peak | near-duplicates |")
        print("|---|---|---|---|")
        row = measure(files, lambda rel: editor.diagnose(rel, texts[rel], known=known))
        print(row)
        return 0
    finally:
        services.close()


if __name__ == "__main__":
    raise SystemExit(main())

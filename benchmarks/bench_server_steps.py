"""The server's memory step by step, in one process: what each start-up step and a workspace pass hold.

    python benchmarks/bench_server_steps.py --workspace WS [--passes 3]
    PYTHONPATH=DIR/server python benchmarks/bench_server_steps.py --workspace WS   # another tree

WS must be indexed (with vectors for the near-duplicate pass: ``mnemo index`` with the local model); it
is copied first, so its index is not written. The steps a language server takes at start run in this
process (build the services, load the model, open and sync the index, the first workspace diagnostics
pass, the first keyword search), then ``--passes`` more passes, then ``--edits`` edits of one note as
an editor's buffer (each indexed, searched for and diagnosed) and the checkpoint the writer makes once
quiet. For each: RSS after it and the peak (VmHWM, reset through /proc/self/clear_refs before each
step), and DuckDB's buffers (``duckdb_memory()``). A pass's transient is its peak less the RSS before it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import copy_of_index


def status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def duckdb_mb(services: Any) -> str:
    store = services.memory.indexer.store
    if store is None:
        return "-"
    with services.memory._write_lock:  # (the writer's connection: a retrieval log flush may be using it)
        rows = store.con.execute(
            "SELECT tag, memory_usage_bytes FROM duckdb_memory() WHERE memory_usage_bytes > 500000"
        ).fetchall()
    return ", ".join(f"{tag} {used / 2**20:.0f}" for tag, used in rows) or "-"


def step(label: str, work: Callable[[], object], services: Any | None) -> None:
    Path("/proc/self/clear_refs").write_text("5")
    before = status_mb("VmRSS")
    work()
    after, peak = status_mb("VmRSS"), status_mb("VmHWM")
    buffers = duckdb_mb(services) if services is not None else "-"
    print(f"| {label} | {before:.0f} | {after:.0f} | {peak:.0f} | +{peak - before:.0f} | {buffers} |")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument(
        "--edits", type=int, default=0, help="then edits of one note as an editor's buffer, and a checkpoint"
    )
    args = parser.parse_args()
    from mnemo.embeddings import prepare
    from mnemo.services import build_services
    from mnemo.text.terms import query_terms

    tmp, ws = copy_of_index(args.workspace, "mnemo-bench-steps-")
    print("| step | RSS before MB | RSS after MB | peak MB | peak over before | DuckDB's buffers MB |")
    print("|---|---|---|---|---|---|")
    services = build_services(ws)
    try:
        import mnemo.lsp.setup  # noqa: F401  (the server's imports)

        step("model loaded (prepare)", lambda: prepare(services.memory.embedder), None)
        step("index opened", services.memory.ensure_open, services)
        step("sync (nothing changed)", services.memory.sync, services)
        for n in range(1 + args.passes):
            step(f"workspace pass {n + 1}", services.editor.diagnose_workspace, services)

        def keyword() -> None:
            with services.memory.indexer.reading() as reader:
                assert reader is not None
                reader.keyword_top(query_terms("deploy staging"), 10)

        step("first keyword top-k (postings load)", keyword, services)
        step("a hybrid search", lambda: services.memory.search("deploy staging"), services)
        rel = sorted(str(p.relative_to(ws)) for p in (ws / "memory").glob("*.md"))[0]
        text = (ws / rel).read_text(encoding="utf-8")
        for n in range(args.edits):

            def edit(n: int = n) -> None:  # as an editor's didChange, then a search that sees it
                new = text + f"\n## Note {n}\nquokka{n}zeta rollout.\n"
                services.memory.schedule_buffer(rel, new, delay_s=0)
                assert services.memory.search(f"quokka{n}zeta").results
                services.editor.diagnose_buffer(rel, new)

            step(f"edit {n + 1} (index, search, diagnose)", edit, services)
        if args.edits:
            step("checkpoint", services.memory.indexer.checkpoint, services)
    finally:
        services.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

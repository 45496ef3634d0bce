"""One system over one corpus in one mode: every figure the comparison needs, each step guarded on its own.

A step that fails is recorded as ``"failed: reason"`` under its key, and the next steps still run, so a peer
that cannot do one thing keeps its other rows.
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from benchmarks.common import percentile
from benchmarks.peers.corpora import Corpus
from benchmarks.peers.systems import Mnemo, System


def _log(msg: str) -> None:
    print(f"bench-peers: {msg}", file=sys.stderr, flush=True)


def _step(res: dict[str, Any], key: str, fn: Callable[[], dict[str, Any]]) -> None:
    t = time.perf_counter()
    try:
        res.update(fn())
    except Exception as exc:  # a peer failing one step must not lose the others
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        res[key] = f"failed: {reason}"
        _log(f"{key} failed: {reason}")
        traceback.print_exc(limit=2, file=sys.stderr)
    _log(f"  {key} done in {time.perf_counter() - t:.1f}s")


def canonical(corpus: Corpus) -> Callable[[str], str]:
    """Maps a system's result path back to the corpus path (QMD lower-cases and re-spells some names)."""

    def norm(p: str) -> str:
        return p.lower().replace("_", "-").replace(" ", "-")

    table = {norm(p): p for p in corpus.files}
    return lambda p: p if p in corpus.files else table.get(norm(p), p)


def measure(sys_: System, edits: int, cli_queries: int, lsp_queries: int) -> dict[str, Any]:
    corpus = sys_.corpus
    res: dict[str, Any] = {"system": sys_.name, "corpus": corpus.name, "mode": sys_.mode}
    queries = [q for _, q in corpus.queries]
    all_edits = corpus.edits(3 * edits)
    edits_inproc, edits_cli, edits_lsp = (all_edits[i * edits : (i + 1) * edits] for i in range(3))
    canon = canonical(corpus)
    _log(f"{sys_.name} / {corpus.name} / {sys_.mode}: {len(corpus.files)} files")
    sys_.setup()

    def full() -> dict[str, Any]:
        timed = sys_.full_index()
        return {"index_s": timed.seconds, "index_rss_mb": timed.peak_rss_mb}

    _step(res, "index_s", full)
    if isinstance(res.get("index_s"), str):
        return res  # nothing to search
    _step(res, "index_mb", lambda: {"index_mb": sys_.index_bytes() / 1e6})

    def inproc() -> dict[str, Any]:
        out = sys_.inproc(queries, noop=3, edits=edits_inproc)
        lat = [r["ms"] for r in out["search"]]
        ranked = {
            qid: list(dict.fromkeys(canon(p) for p in r["paths"]))
            for (qid, _), r in zip(corpus.queries, out["search"], strict=True)
        }
        errors = [r["error"] for r in out["search"] if r.get("error")]
        failed: Any = f"failed: {out['sync_error']}" if out.get("sync_error") else float("nan")
        noop = out["noop_ms"]
        edit_ms = [e["ms"] for e in out["edits"]]
        return {
            "load_ms": out["load_ms"],
            "search_p50_ms": percentile(lat, 50),
            "search_p95_ms": percentile(lat, 95),
            "search_n": len(lat),
            "search_errors": len(errors),
            "search_error": errors[0] if errors else "",
            "ranked": ranked,
            "noop_inproc_ms": statistics.median(noop) if noop else failed,
            "edit_inproc_ms": statistics.median(edit_ms) if edit_ms else failed,
            "edit_inproc_found": f"{sum(e['found'] for e in out['edits'])}/{len(out['edits'])}",
            "inproc_rss_mb": out.get("peak_rss_mb", float("nan")),
        }

    _step(res, "search_p50_ms", inproc)

    def cli() -> dict[str, Any]:
        lat = [sys_.cli_search(q)[0] * 1000 for q in queries[:cli_queries]]
        return {"cli_p50_ms": percentile(lat, 50), "cli_p95_ms": percentile(lat, 95), "cli_n": len(lat)}

    _step(res, "cli_p50_ms", cli)
    _step(res, "noop_cli_s", lambda: {"noop_cli_s": statistics.median(sys_.noop_cli() for _ in range(2))})

    def cli_edit() -> dict[str, Any]:
        rows = [sys_.cli_edit(e) for e in edits_cli]
        return {
            "edit_cli_ms": statistics.median(s for s, _ in rows) * 1000,
            "edit_cli_found": f"{sum(f for _, f in rows)}/{len(rows)}",
        }

    _step(res, "edit_cli_ms", cli_edit)
    if isinstance(sys_, Mnemo) and lsp_queries:

        def lsp() -> dict[str, Any]:
            out = sys_.lsp(queries[:lsp_queries], edits_lsp)
            return {
                "lsp_p50_ms": percentile(out["search_ms"], 50),
                "lsp_p95_ms": percentile(out["search_ms"], 95),
                "edit_lsp_ms": statistics.median(e["ms"] for e in out["edits"]),
                "edit_lsp_found": f"{sum(e['found'] for e in out['edits'])}/{len(out['edits'])}",
            }

        _step(res, "lsp_p50_ms", lsp)
    return res

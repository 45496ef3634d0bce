"""Retrieval quality of mnemo search on a BEIR-format dataset (or the synthetic needle set).

Each corpus document becomes an undated memory file ``memory/<id>.md`` (``# title`` first when the document
has one), the workspace is indexed, and every query is run through ``MemoryService.search`` (10 results,
min_score 0). Results are chunks; they are mapped back to documents by path and de-duplicated (first
occurrence wins), so a document split into several chunks counts once. Reported per mode and chunk size:
Recall@5, MRR@10 and nDCG@10 (linear gains from the qrels), plus what each returned result costs to read:
mean lines and approximate tokens (mnemo's chunker estimate) of the chunk's line range.

Modes: keyword (provider none, BM25 only) and hybrid (local all-MiniLM-L6-v2 + BM25). Vectors for hybrid
runs are cached in benchmarks/out/cache/ (by text), so re-runs and other chunk sizes only embed new texts;
this benchmark measures quality, not speed.

    python benchmarks/bench_retrieval.py --dataset ../shared/data/msmarco-5k --modes keyword,hybrid
    python benchmarks/bench_retrieval.py --dataset ../shared/data/cmrc2018-zh --modes hybrid --max-queries 300
    python benchmarks/bench_retrieval.py --synthetic --lang en
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (
    OUT,
    CachingEmbedder,
    command_line,
    install_embedder,
    machine,
    machine_line,
    md_table,
    mean,
)
from mnemo.markdown.chunker import approx_tokens
from mnemo.services import build_services

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class Dataset:
    name: str
    write: Callable[[Path], None]
    """Writes the memory files into a workspace folder."""
    queries: list[tuple[str, str]]
    qrels: dict[str, dict[str, int]]
    """query id -> {workspace-relative path: grade}."""


def doc_path(doc_id: str) -> str:
    return f"memory/{_SAFE.sub('_', doc_id)}.md"


def load_beir(folder: Path, max_docs: int = 0) -> Dataset:
    docs: list[tuple[str, str, str]] = []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            docs.append((str(d["_id"]), (d.get("title") or "").strip(), d.get("text") or ""))
    name = folder.name
    if max_docs and max_docs < len(docs):
        # The first documents in file-name order (the order mnemo indexes them), so a time-bounded run can stop
        # and resume with the vectors it already has.
        docs = sorted(docs, key=lambda d: doc_path(d[0]))[:max_docs]
        name = f"{folder.name}-first{max_docs}"
    kept = {doc_path(d[0]) for d in docs}
    queries: list[tuple[str, str]] = []
    with (folder / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries.append((str(q["_id"]), q["text"]))
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if i == 0 and not parts[-1].lstrip("-").isdigit():
                continue
            if int(parts[2]) > 0 and doc_path(parts[1]) in kept:
                qrels.setdefault(parts[0], {})[doc_path(parts[1])] = int(parts[2])
    queries = [q for q in queries if q[0] in qrels]

    def write(ws: Path) -> None:
        (ws / "memory").mkdir(parents=True, exist_ok=True)
        for doc_id, title, text in docs:
            body = f"# {title}\n\n{text}\n" if title else f"{text}\n"
            (ws / doc_path(doc_id)).write_text(body, encoding="utf-8")

    return Dataset(name, write, queries, qrels)


def load_synthetic(lang: str, files: int, seed: int) -> Dataset:
    from benchmarks.synthetic import generate

    spec = generate(files=files, lang=lang, seed=seed, write_to=None)
    queries = [(f"n{i}", n.query) for i, n in enumerate(spec.needles)]
    qrels = {f"n{i}": {n.path: 1} for i, n in enumerate(spec.needles)}

    def write(ws: Path) -> None:
        spec.write(ws)

    return Dataset(f"synthetic-{lang}-{files}", write, queries, qrels)


def dcg(gains: list[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ranked_paths(hits: Iterable[Any]) -> list[str]:
    """The files of search hits in order, each once (the document ranking the metrics score)."""
    return list(dict.fromkeys(hit.path for hit in hits))


def evaluate(ranked: list[str], relevant: dict[str, int]) -> tuple[float, float, float]:
    top5 = ranked[:5]
    recall5 = sum(1 for p in top5 if p in relevant) / len(relevant)
    mrr = 0.0
    for i, p in enumerate(ranked[:10]):
        if p in relevant:
            mrr = 1.0 / (i + 1)
            break
    ideal = dcg(sorted((float(g) for g in relevant.values()), reverse=True)[:10])
    ndcg = dcg([float(relevant.get(p, 0)) for p in ranked[:10]]) / ideal if ideal else 0.0
    return recall5, mrr, ndcg


def run_one(
    ds: Dataset, mode: str, target_tokens: int, args: argparse.Namespace, queries: list[tuple[str, str]]
) -> dict[str, object]:
    ws = Path(args.workdir) / f"{ds.name}-{mode}-{target_tokens}"
    if args.fresh and ws.exists():
        shutil.rmtree(ws)
    if not (ws / "memory").is_dir():
        ws.mkdir(parents=True, exist_ok=True)
        ds.write(ws)
    (ws / "mnemo.toml").write_text(
        f'[chunking]\ntarget_tokens = {target_tokens}\n\n[search]\ndecay = "off"\n\n'
        f"[embedding]\nthreads = {args.threads}\n",
        encoding="utf-8",
    )
    services = build_services(ws, provider="none" if mode == "keyword" else "local")
    cache = None
    if mode == "hybrid":
        cache = CachingEmbedder(
            services.memory.embedder, OUT / "cache" / f"{ds.name.split('-first')[0]}-minilm.npz"
        )
        install_embedder(services, cache)
    lines_cache: dict[str, list[str]] = {}
    try:
        t0 = time.perf_counter()
        last = [0.0]

        def progress(done: int, total: int, current: str) -> None:
            now = time.perf_counter()
            if now - last[0] > 30:
                last[0] = now
                print(f"  [{mode} {target_tokens}] {done}/{total} files, {now - t0:.0f}s", file=sys.stderr)

        report = services.memory.sync(progress=progress)
        index_s = time.perf_counter() - t0
        chunks = services.memory.status().chunks
        scores: list[tuple[float, float, float]] = []
        cost_lines: list[int] = []
        cost_tokens: list[int] = []
        n_results: list[int] = []
        t1 = time.perf_counter()
        for qid, text in queries:
            out = services.memory.search(text, max_results=10, min_score=0.0)
            for hit in out.results:
                file_lines = lines_cache.get(hit.path)
                if file_lines is None:
                    file_lines = (ws / hit.path).read_text(encoding="utf-8").splitlines()
                    lines_cache[hit.path] = file_lines
                cost_lines.append(hit.end_line - hit.start_line + 1)
                cost_tokens.append(approx_tokens("\n".join(file_lines[hit.start_line - 1 : hit.end_line])))
            n_results.append(len(out.results))
            scores.append(evaluate(ranked_paths(out.results), ds.qrels[qid]))
        search_s = time.perf_counter() - t1
    finally:
        services.close()
    return {
        "dataset": ds.name,
        "mode": mode,
        "target_tokens": target_tokens,
        "queries": len(queries),
        "files": report.files_seen,
        "chunks": chunks,
        "chunks_embedded": report.chunks_embedded,
        "vectors_computed_this_run": cache.computed if cache else 0,
        "index_seconds": round(index_s, 2),
        "search_seconds": round(search_s, 2),
        "recall@5": mean([s[0] for s in scores]),
        "mrr@10": mean([s[1] for s in scores]),
        "ndcg@10": mean([s[2] for s in scores]),
        "mean_results": mean(n_results),
        "mean_lines_per_result": mean(cost_lines),
        "mean_tokens_per_result": mean(cost_tokens),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", type=Path, help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv")
    src.add_argument("--synthetic", action="store_true", help="the synthetic workspace's needle queries")
    parser.add_argument("--lang", default="en", choices=["en", "zh"], help="synthetic: language (default en)")
    parser.add_argument("--files", type=int, default=1000, help="synthetic: workspace size (default 1000)")
    parser.add_argument("--seed", type=int, default=7, help="synthetic: seed (default 7)")
    parser.add_argument("--modes", default="keyword,hybrid", help="keyword,hybrid (default both)")
    parser.add_argument("--target-tokens", default="128,256,384", help="chunk sizes (default 128,256,384)")
    parser.add_argument("--max-queries", type=int, default=0, help="use the first N queries (0: all)")
    parser.add_argument(
        "--max-docs",
        type=int,
        default=0,
        help="index only the first N documents by file name; qrels are cut to them (0: all)",
    )
    parser.add_argument(
        "--hybrid-target-tokens",
        default="",
        help="chunk sizes for hybrid mode only (default: --target-tokens)",
    )
    parser.add_argument("--threads", type=int, default=0, help="embedding threads (0: all cores)")
    parser.add_argument("--workdir", default="/tmp/mnemo-bench/retrieval", help="where workspaces are built")
    parser.add_argument("--fresh", action="store_true", help="rebuild workspaces from scratch")
    parser.add_argument("--name", default="", help="output name (default retrieval-<dataset>)")
    args = parser.parse_args(argv)

    ds = (
        load_beir(args.dataset, args.max_docs)
        if args.dataset
        else load_synthetic(args.lang, args.files, args.seed)
    )
    queries = ds.queries[: args.max_queries] if args.max_queries else ds.queries
    sizes = [int(x) for x in args.target_tokens.split(",") if x]
    hybrid_sizes = [int(x) for x in args.hybrid_target_tokens.split(",") if x] or sizes
    m = machine()
    rows: list[dict[str, object]] = []
    name = args.name or f"retrieval-{ds.name}"
    for mode in [x.strip() for x in args.modes.split(",") if x.strip()]:
        for tt in hybrid_sizes if mode == "hybrid" else sizes:
            print(f"{ds.name}: {mode}, target_tokens={tt}, {len(queries)} queries ...", file=sys.stderr)
            rows.append(run_one(ds, mode, tt, args, queries))
            r = rows[-1]
            print(
                f"  recall@5={r['recall@5']:.3f} mrr@10={r['mrr@10']:.3f} ndcg@10={r['ndcg@10']:.3f} "
                f"index {r['index_seconds']}s, search {r['search_seconds']}s",
                file=sys.stderr,
            )
            report(name, ds, queries, rows, m)  # after every run, so a stopped run keeps what it measured
    return 0


def report(
    name: str, ds: Dataset, queries: list[tuple[str, str]], rows: list[dict[str, object]], m: dict
) -> None:
    table = md_table(
        [
            "mode",
            "target_tokens",
            "queries",
            "chunks",
            "Recall@5",
            "MRR@10",
            "nDCG@10",
            "lines/result",
            "tokens/result",
        ],
        [
            [
                r["mode"],
                r["target_tokens"],
                r["queries"],
                r["chunks"],
                r["recall@5"],
                r["mrr@10"],
                r["ndcg@10"],
                r["mean_lines_per_result"],
                r["mean_tokens_per_result"],
            ]
            for r in rows
        ],
    )
    md = (
        f"### Retrieval quality: {ds.name} ({len(queries)} queries)\n\n{table}\n\n"
        f"{machine_line(m)}\nCommand: `{command_line()}`\n"
    )
    write_outputs(name, {"machine": m, "command": command_line(), "results": rows}, md)


def write_outputs(name: str, data: dict[str, object], md: str) -> None:
    from benchmarks.common import write_outputs as _write

    _write(name, data, md)


if __name__ == "__main__":
    raise SystemExit(main())

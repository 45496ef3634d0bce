"""Vectors that understand Chinese: the bundled all-MiniLM-L6-v2 (provider local) against USE-m3 (use-m3).

Three measurements, each for every provider in --providers:

Recall@5 is the share of a query's relevant documents in the top 5 (msmarco-5k has several graded ones per
query, so it stays low there); Hit@5 whether any is; MRR@10 and nDCG@10 as in bench_retrieval.py.

* vector-only: each document (``# title`` + text, as mnemo writes it) embedded whole by the provider (long
  texts in windows, averaged), each query embedded, documents ranked by cosine. Recall@5 and MRR@10.
* hybrid: the same documents as a workspace (``memory/<id>.md``), indexed and searched through
  ``MemoryService.search`` with mnemo's defaults (10 results, min_score 0), BM25 + that provider's vectors.
* cross-language: benchmarks/crosslang_set.py, 10 English questions about Chinese notes and 10 Chinese
  questions about English notes (32 notes), vector-only and hybrid, Recall@5 / MRR@10 per direction.

Data sets are read where they are (``--data-dir``, default ../shared/data beside the repository), never
copied: cmrc2018-zh (first --cmrc-docs paragraphs by file name and their questions) and msmarco-5k (first
--msmarco-docs passages and the queries with a relevant one among them). Vectors are cached by text in
benchmarks/out/cache/<dataset>-<model>.npz (MiniLM's cache is shared with bench_retrieval.py), so re-runs only
embed new texts; "encode texts/s" counts only vectors computed in this run. Writes
benchmarks/out/<name>.json and .md.

    python benchmarks/bench_multilingual.py                      # everything, both providers
    python benchmarks/bench_multilingual.py --sets cross         # the cross-language set only (fast)
    python benchmarks/bench_multilingual.py --sets cmrc --parts vector --providers use-m3 --cmrc-docs 100
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_retrieval import evaluate, load_beir, ranked_paths
from benchmarks.common import (
    OUT,
    ROOT,
    CachingEmbedder,
    command_line,
    install_embedder,
    machine,
    machine_line,
    md_table,
    mean,
    write_outputs,
)
from benchmarks.crosslang_set import NOTES, QUERIES
from mnemo.config import EmbeddingSettings
from mnemo.embeddings import build_embedder
from mnemo.services import build_services

SETS = {"cmrc": "cmrc2018-zh", "msmarco": "msmarco-5k"}
CACHE_NAMES = {"local": "minilm", "use-m3": "use-m3"}


class BatchCachingEmbedder(CachingEmbedder):
    """CachingEmbedder that embeds the texts it has not seen in one batch (USE-m3 is ~3x faster batched)."""

    def __init__(self, inner: Any, path: Path) -> None:
        super().__init__(inner, path)
        self.seconds = 0.0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest()[:40] for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self.cache}.items())
        if missing:
            t0 = time.perf_counter()
            vectors = self.inner.embed([t for _, t in missing])
            self.seconds += time.perf_counter() - t0
            for (key, _), vec in zip(missing, vectors, strict=True):
                self.cache[key] = vec
            self.dirty += len(missing)
            self.computed += len(missing)
            if time.monotonic() - self.last_save > 60:
                self.save()
        return np.asarray([self.cache[k] for k in keys], dtype=np.float32)


def cached_embedder(provider: str, dataset: str, threads: int) -> BatchCachingEmbedder:
    inner = build_embedder(EmbeddingSettings(provider=provider, threads=threads))  # type: ignore[arg-type]
    return BatchCachingEmbedder(inner, OUT / "cache" / f"{dataset}-{CACHE_NAMES.get(provider, provider)}.npz")


def scores(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    rows = [evaluate(ranked, qrels[qid]) for qid, ranked in rankings.items()]
    hits = [any(p in qrels[qid] for p in ranked[:5]) for qid, ranked in rankings.items()]
    return {
        "recall@5": mean([r[0] for r in rows]),
        "hit@5": mean([float(h) for h in hits]),
        "mrr@10": mean([r[1] for r in rows]),
        "ndcg@10": mean([r[2] for r in rows]),
    }


def vector_only(
    files: dict[str, str], queries: list[tuple[str, str]], embedder: BatchCachingEmbedder, batch: int = 64
) -> dict[str, list[str]]:
    """query id -> the 10 nearest documents by cosine."""
    paths = sorted(files)
    docs = np.concatenate(
        [embedder.embed([files[p] for p in paths[i : i + batch]]) for i in range(0, len(paths), batch)]
    )
    qvecs = embedder.embed([text for _, text in queries])
    sims = qvecs @ docs.T
    order = np.argsort(-sims, axis=1)[:, :10]
    return {qid: [paths[j] for j in order[i]] for i, (qid, _) in enumerate(queries)}


def hybrid(
    ws: Path, provider: str, embedder: BatchCachingEmbedder, queries: list[tuple[str, str]], threads: int
) -> tuple[dict[str, list[str]], float]:
    """query id -> documents of mnemo's search results in order (de-duplicated); and the index seconds."""
    (ws / "mnemo.toml").write_text(f"[embedding]\nthreads = {threads}\n", encoding="utf-8")
    services = build_services(ws, provider=provider)
    install_embedder(services, embedder)
    try:
        t0 = time.perf_counter()
        services.memory.sync()
        index_s = time.perf_counter() - t0
        out: dict[str, list[str]] = {}
        for qid, text in queries:
            out[qid] = ranked_paths(services.memory.search(text, max_results=10, min_score=0.0).results)
    finally:
        services.close()
    return out, index_s


def load_set(name: str, args: argparse.Namespace) -> tuple[dict[str, str], list[tuple[str, str]], dict]:
    """(workspace files, queries, qrels) of a data set or of the cross-language set."""
    if name == "cross":
        return dict(NOTES), [(q, text) for q, text, _ in QUERIES], {q: {p: 1} for q, _, p in QUERIES}
    folder = args.data_dir / SETS[name]
    if not (folder / "corpus.jsonl").is_file():
        raise SystemExit(f"{folder} is not a BEIR folder: pass --data-dir (or leave {name} out of --sets)")
    ds = load_beir(folder, args.cmrc_docs if name == "cmrc" else args.msmarco_docs)
    tmp = args.workdir / f"{ds.name}-files"
    if not (tmp / "memory").is_dir():
        ds.write(tmp)
    files = {str(p.relative_to(tmp)): p.read_text(encoding="utf-8") for p in (tmp / "memory").glob("*.md")}
    queries = ds.queries[: args.max_queries] if args.max_queries else ds.queries
    return files, queries, ds.qrels


def run_set(name: str, provider: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    files, queries, qrels = load_set(name, args)
    dataset = "crosslang" if name == "cross" else SETS[name]
    rows: list[dict[str, Any]] = []
    base = {"set": name, "provider": provider, "docs": len(files), "queries": len(queries)}
    for part in args.parts:
        embedder = cached_embedder(provider, dataset, args.threads)
        print(f"{name}: {provider} {part}, {len(files)} docs, {len(queries)} queries ...", file=sys.stderr)
        index_s = 0.0
        if part == "vector":
            rankings = vector_only(files, queries, embedder)
        else:
            ws = args.workdir / f"{dataset}-{len(files)}-{provider}"
            if args.fresh and ws.exists():
                shutil.rmtree(ws)
            if not (ws / "memory").is_dir():
                for rel, text in files.items():
                    (ws / rel).parent.mkdir(parents=True, exist_ok=True)
                    (ws / rel).write_text(text, encoding="utf-8")
            rankings, index_s = hybrid(ws, provider, embedder, queries, args.threads)
        embedder.close()
        row = {**base, "part": part, **scores(rankings, qrels), "model": embedder.model}
        row["encoded"] = embedder.computed
        row["encode_texts_per_s"] = embedder.computed / embedder.seconds if embedder.seconds else float("nan")
        row["index_seconds"] = round(index_s, 1)
        if name == "cross":
            for direction in ("en2zh", "zh2en"):
                part_q = {q: r for q, r in rankings.items() if q.startswith(direction)}
                row[f"recall@5 {direction}"] = scores(part_q, qrels)["recall@5"]
        rows.append(row)
        print(f"  recall@5={row['recall@5']:.3f} mrr@10={row['mrr@10']:.3f}", file=sys.stderr)
    return rows


def report(name: str, rows: list[dict[str, Any]], m: dict[str, Any]) -> None:
    table = md_table(
        [
            "set",
            "provider",
            "part",
            "docs",
            "queries",
            "Recall@5",
            "Hit@5",
            "MRR@10",
            "nDCG@10",
            "encoded",
            "encode texts/s",
        ],
        [
            [
                r["set"],
                r["provider"],
                r["part"],
                r["docs"],
                r["queries"],
                r["recall@5"],
                r["hit@5"],
                r["mrr@10"],
                r["ndcg@10"],
                r["encoded"],
                r["encode_texts_per_s"],
            ]
            for r in rows
        ],
    )
    cross = [r for r in rows if r["set"] == "cross"]
    if cross:
        table += "\n\n" + md_table(
            ["cross-language", "part", "Recall@5 en→zh", "Recall@5 zh→en"],
            [[r["provider"], r["part"], r["recall@5 en2zh"], r["recall@5 zh2en"]] for r in cross],
        )
    md = f"### Multilingual retrieval: MiniLM against USE-m3\n\n{table}\n\n{machine_line(m)}\n"
    md += f"Command: `{command_line()}`\n"
    write_outputs(name, {"machine": m, "command": command_line(), "results": rows}, md)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=ROOT.parent / "shared" / "data",
        help="folder holding cmrc2018-zh/ and msmarco-5k/ (default ../shared/data)",
    )
    parser.add_argument(
        "--sets", default="cross,cmrc,msmarco", help="any of cross,cmrc,msmarco (default all)"
    )
    parser.add_argument(
        "--providers", default="local,use-m3", help="embedding providers (default local,use-m3)"
    )
    parser.add_argument("--parts", default="vector,hybrid", help="vector,hybrid (default both)")
    parser.add_argument("--cmrc-docs", type=int, default=300, help="cmrc2018-zh paragraphs (default 300)")
    parser.add_argument("--msmarco-docs", type=int, default=1000, help="msmarco-5k passages (default 1000)")
    parser.add_argument("--max-queries", type=int, default=0, help="first N queries of each set (0: all)")
    parser.add_argument("--threads", type=int, default=0, help="embedding threads (0: the idle cores)")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/mnemo-bench/multilingual"),
        help="where workspaces are built (default /tmp/mnemo-bench/multilingual)",
    )
    parser.add_argument("--fresh", action="store_true", help="rebuild the hybrid workspaces' indexes")
    parser.add_argument("--name", default="multilingual", help="output name (default multilingual)")
    args = parser.parse_args(argv)
    args.parts = [p for p in args.parts.split(",") if p in ("vector", "hybrid")]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    m = machine()
    rows: list[dict[str, Any]] = []
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        for provider in [p.strip() for p in args.providers.split(",") if p.strip()]:
            rows.extend(run_set(name, provider, args))
            report(args.name, rows, m)  # after every run, so a stopped run keeps what it measured
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

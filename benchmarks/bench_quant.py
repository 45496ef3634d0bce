"""Is MiniLM in Q8_0 as good as in F16? Vector-only retrieval on a BEIR set, both models, same passages.

    python benchmarks/bench_quant.py --dataset ../shared/data/msmarco-5k [--max-docs 5000]

Both GGUF files are converted by mnemo from the same safetensors (embeddings/gguf_convert.py:
``ensure_default_gguf(quant=...)``). Every passage (title + text) and every query is embedded with each
model through mnemo's LocalEmbedder; passages are ranked by cosine similarity alone (no BM25, no decay,
so the model is all that differs). Reports nDCG@10, Recall@10 and MRR@10 over the queries with
relevance judgements, the mean and minimum cosine between a passage's F16 and Q8_0 vectors, how often
the two models' top-10 lists agree, the embedding rate of each (chunks/s and CPU s per chunk, with the
load average), and the file sizes. The data set is read where it lies, never copied.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "server"))  # after PYTHONPATH: a tree given there is the one measured

from benchmarks.common import cpu_seconds  # noqa: E402


def load(
    folder: Path, max_docs: int
) -> tuple[list[str], list[str], list[tuple[str, str]], dict[str, dict[str, int]]]:
    ids, texts = [], []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            title = (d.get("title") or "").strip()
            ids.append(str(d["_id"]))
            texts.append(f"{title}\n{d.get('text') or ''}" if title else d.get("text") or "")
            if max_docs and len(ids) >= max_docs:
                break
    kept = set(ids)
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3 and parts[2].isdigit() and int(parts[2]) > 0 and parts[1] in kept:
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    queries = []
    with (folder / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if str(q["_id"]) in qrels:
                queries.append((str(q["_id"]), q["text"]))
    return ids, texts, queries, qrels


def embed_all(embedder: Any, texts: list[str]) -> tuple[np.ndarray, dict[str, float]]:
    load1 = float(Path("/proc/loadavg").read_text().split()[0])
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    vectors = np.concatenate([embedder.embed(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    return vectors, {"rate": len(texts) / wall, "cpu": cpu / len(texts), "load": load1}


def scores(ranked: list[str], relevant: dict[str, int]) -> tuple[float, float, float]:
    top = ranked[:10]
    dcg = sum((2 ** relevant.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(top))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    recall = len([d for d in top if d in relevant]) / len(relevant)
    mrr = next((1 / (i + 1) for i, d in enumerate(top) if d in relevant), 0.0)
    return dcg / idcg if idcg else 0.0, recall, mrr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--max-docs", type=int, default=0)
    args = parser.parse_args(argv)

    from mnemo.embeddings.base import default_cache_dir
    from mnemo.embeddings.gguf_convert import ensure_default_gguf
    from mnemo.embeddings.local import LocalEmbedder

    ids, texts, queries, qrels = load(args.dataset, args.max_docs)
    models = default_cache_dir(None) / "models"
    results: dict[str, dict[str, Any]] = {}
    rankings: dict[str, list[list[str]]] = {}
    vectors: dict[str, np.ndarray] = {}
    for quant in ("f16", "q8_0"):
        path, _ = ensure_default_gguf(models, quant=quant)
        embedder = LocalEmbedder(None if quant == "f16" else path, models)
        embedder.embed(["warm up"])
        docs, rate = embed_all(embedder, texts)
        qvecs = embedder.embed([q for _, q in queries])
        embedder.close()
        order = np.argsort(-(qvecs @ docs.T), axis=1)[:, :10]
        rankings[quant] = [[ids[j] for j in row] for row in order]
        per_query = [scores(r, qrels[qid]) for r, (qid, _) in zip(rankings[quant], queries, strict=True)]
        results[quant] = {
            "nDCG@10": float(np.mean([s[0] for s in per_query])),
            "Recall@10": float(np.mean([s[1] for s in per_query])),
            "MRR@10": float(np.mean([s[2] for s in per_query])),
            "MB": path.stat().st_size / 2**20,
            **rate,
        }
        vectors[quant] = docs
        print(f"{quant}: {results[quant]}", file=sys.stderr, flush=True)
    cosines = (vectors["f16"] * vectors["q8_0"]).sum(axis=1)
    overlap = np.mean(
        [len(set(a) & set(b)) / 10 for a, b in zip(rankings["f16"], rankings["q8_0"], strict=True)]
    )
    print(
        f"\n`python benchmarks/bench_quant.py {' '.join(sys.argv[1:])}`: {len(texts):,} passages, "
        f"{len(queries)} judged queries, vector-only ranking\n"
    )
    print("| model | nDCG@10 | Recall@10 | MRR@10 | file MB | chunks/s | CPU s per chunk | load |")
    print("|---|---|---|---|---|---|---|---|")
    for quant, r in results.items():
        print(
            f"| MiniLM {quant.upper()} | {r['nDCG@10']:.4f} | {r['Recall@10']:.4f} | {r['MRR@10']:.4f} "
            f"| {r['MB']:.1f} | {r['rate']:.1f} | {r['cpu']:.4f} | {r['load']:.1f} |"
        )
    print(
        f"\nF16 vs Q8_0 vectors of the same passage: cosine mean {cosines.mean():.5f}, min {cosines.min():.5f}; "
        f"top-10 lists overlap {overlap:.1%}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

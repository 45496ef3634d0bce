"""Does every ranking layer earn its place? The plain baseline, each layer added alone, and all together.

Sets: ``recall`` (benchmarks/recall_set.py, the generated development set), ``msmarco`` and ``cmrc`` (BEIR
folders under ``--data-dir``: msmarco-5k, cmrc2018-zh, each document as ``memory/<id>.md``). One index per
set, provider and chunk size; the configurations change the search settings on that index (as
benchmarks/bench_recall.py does). The plain baseline: BM25 + vectors at 0.3/0.7, no decay, no MMR, no
MEMORY.md weight, sessions mixed in, the same vector weight for every language, no cut-off.

Reported: for ``recall`` Hit@1, Hit@5, MRR@10, lines/result, newest-first and empty answers (see
bench_recall.py); for the BEIR sets Recall@5, Hit@5, MRR@10, nDCG@10 (documents, de-duplicated, 10 results) and empty
answers. Vectors are cached by text in benchmarks/out/cache/<set>-<model>.npz (quality figures, not timings).

    python benchmarks/bench_ablation.py --sets recall,msmarco,cmrc --provider local
    python benchmarks/bench_ablation.py --sets cmrc --provider use-m3 --configs baseline,defaults
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_multilingual import cached_embedder, scores
from benchmarks.bench_recall import BASELINE
from benchmarks.bench_recall import evaluate as evaluate_recall
from benchmarks.bench_retrieval import load_beir, ranked_paths
from benchmarks.common import command_line, install_embedder, machine, machine_line, md_table, write_outputs
from benchmarks.recall_set import TODAY, build

CONFIGS: dict[str, dict[str, Any]] = {
    "baseline": BASELINE,
    "+ recency (supersede)": {**BASELINE, "decay": "supersede"},
    "+ recency (multiplicative)": {**BASELINE, "decay": "multiplicative"},
    "+ MMR λ 0.7": {**BASELINE, "mmr": True, "mmr_lambda": 0.7},
    "+ MMR λ 0.85": {**BASELINE, "mmr": True, "mmr_lambda": 0.85},
    "+ MEMORY.md boost": {**BASELINE, "memory_weight": 1.5},
    "+ sessions below notes": {**BASELINE, "sessions_below_notes": True},
    "+ CJK vector weight (auto)": {**BASELINE, "cjk_vector_weight": -1.0},
    "+ calibrated cut-off": {k: v for k, v in BASELINE.items() if k != "min_score"},
    "defaults (all together)": {},
    "defaults without recency": {"decay": "off"},
    "defaults without MMR": {"mmr": False},
    "defaults with CJK vector weight 0.1": {"cjk_vector_weight": 0.1},
    "defaults with CJK vector weight 0": {"cjk_vector_weight": 0.0},
}
SETS = {"msmarco": "msmarco-5k", "cmrc": "cmrc2018-zh"}


def evaluate_beir(
    memory: Any, queries: list[tuple[str, str]], qrels: dict[str, dict[str, int]], config: dict[str, Any]
) -> dict[str, Any]:
    settings = memory.settings.search
    saved = {k: getattr(settings, k) for k in config if k != "min_score"}
    for k, v in config.items():
        if k != "min_score":
            setattr(settings, k, v)
    rankings: dict[str, list[str]] = {}
    empty = 0
    try:
        for qid, text in queries:
            results = memory.search(
                text, max_results=10, min_score=config.get("min_score"), today=TODAY
            ).results
            empty += not results
            rankings[qid] = ranked_paths(results)
    finally:
        for k, v in saved.items():
            setattr(settings, k, v)
    return {**scores(rankings, qrels), "empty_rate": empty / max(1, len(queries))}


def workspace(args: argparse.Namespace, name: str, chunk: int) -> tuple[Path, Any, Any]:
    """(workspace, questions or queries, qrels or None), the files written once."""
    ws = args.workdir / f"{name}-{args.provider}-{chunk}-{args.max_docs}"
    if name == "recall":
        files, questions = build(args.seed)
        qrels = None
        if ws.exists():
            shutil.rmtree(ws)
        for rel, text in files.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text, encoding="utf-8")
    else:
        ds = load_beir(args.data_dir / SETS[name], args.max_docs)
        if not (ws / "memory").is_dir():
            ds.write(ws)
        questions = ds.queries[: args.max_queries] if args.max_queries else ds.queries
        qrels = ds.qrels
    toml = f"[embedding]\nthreads = {args.threads}\n\n[chunking]\ntarget_tokens = {chunk}\n"
    (ws / "mnemo.toml").write_text(toml, encoding="utf-8")
    return ws, questions, qrels


def run(args: argparse.Namespace, name: str, chunk: int, configs: list[str]) -> list[dict[str, Any]]:
    from mnemo.services import build_services

    ws, questions, qrels = workspace(args, name, chunk)
    services = build_services(ws, provider=args.provider)
    embedder = None
    if args.provider != "none":
        embedder = cached_embedder(args.provider, SETS.get(name, name), args.threads)
        install_embedder(services, embedder)
    rows: list[dict[str, Any]] = []
    try:
        services.memory.sync()
        for config in configs:
            if name == "recall":
                r = evaluate_recall(services.memory, ws, questions, CONFIGS[config])
            else:
                r = evaluate_beir(services.memory, questions, qrels, CONFIGS[config])
            label = config if chunk == args.chunk else f"{config}, chunks {chunk} tokens"
            r.update(set=name, provider=args.provider, config=label, queries=len(questions))
            rows.append(r)
            print(f"{name} {label}: hit@5 {r['hit@5']:.3f} mrr {r['mrr@10']:.3f}", file=sys.stderr)
    finally:
        if embedder is not None:
            embedder.close()
        services.close()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    if rows[0]["set"] == "recall":
        cols = ["configuration", "Hit@1", "Hit@5", "MRR@10", "lines/result", "newest first", "empty"]
        keys = ["hit@1", "hit@5", "mrr@10", "lines_per_result", "newest_first", "empty_rate"]
    else:
        cols = ["configuration", "Recall@5", "Hit@5", "MRR@10", "nDCG@10", "empty"]
        keys = ["recall@5", "hit@5", "mrr@10", "ndcg@10", "empty_rate"]
    return md_table(cols, [[r["config"], *[r[k] for k in keys]] for r in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", default="recall,msmarco,cmrc")
    parser.add_argument("--provider", default="local", choices=["local", "none", "use-m3"])
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names of CONFIGS")
    parser.add_argument("--chunk", type=int, default=256, help="chunking.target_tokens of the main index")
    parser.add_argument("--chunk-sizes", default="", help="more chunk sizes, run with the defaults only")
    parser.add_argument("--max-docs", type=int, default=0, help="first N documents of a BEIR set (0: all)")
    parser.add_argument("--max-queries", type=int, default=0)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/mnemo-bench/ablation"))
    parser.add_argument("--name", default="ablation")
    args = parser.parse_args(argv)
    m = machine()
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    md = []
    results = []
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        rows = run(args, name, args.chunk, configs)
        for size in [int(x) for x in args.chunk_sizes.split(",") if x.strip()]:
            rows += run(args, name, size, ["defaults (all together)"])
        results += rows
        docs = f", first {args.max_docs} documents" if args.max_docs and name != "recall" else ""
        md.append(f"#### {name} ({args.provider}{docs}, {rows[0]['queries']} questions)\n\n{table(rows)}\n")
    text = "\n".join(md) + f"\n{machine_line(m)}\nCommand: `{command_line()}`\n"
    write_outputs(
        f"{args.name}-{args.provider}", {"machine": m, "command": command_line(), "results": results}, text
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

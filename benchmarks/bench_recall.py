"""Recall users can trust: the generated development set of benchmarks/recall_set.py, with an ablation.

The workspace (seeded) is indexed once per mode (keyword: provider none; hybrid: local MiniLM, vectors cached
in benchmarks/out/cache/), then every question is searched (10 results, today = 2026-11-30) under each
configuration: ``defaults`` (the settings as shipped, with the default cut-off: ``min_score`` not passed),
``baseline`` (the plain baseline: no decay, no MMR, no MEMORY.md weight, sessions mixed in, the same vector
weight for every language, no cut-off) and each ranking layer switched off alone.

Reported: Hit@1, Hit@5, MRR@10 (the expected statement: its file and a chunk whose lines contain its value),
lines per result (the top 5), newest-first (updated facts: the first result holding any version holds the
newest), empty answers (no result at all, while every question has a relevant note), and how often a session
transcript ranks above the answer.

    python benchmarks/bench_recall.py --modes keyword,hybrid
    PYTHONPATH=/tmp/mnemo-head/server python benchmarks/bench_recall.py --configs defaults --label before
"""

from __future__ import annotations

import argparse
import shutil
import sys
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
    write_outputs,
)
from benchmarks.recall_set import TODAY, Question, build, holds

BASELINE: dict[str, Any] = {
    "decay": "off",
    "mmr": False,
    "memory_weight": 1.0,
    "sessions_below_notes": False,
    "cjk_vector_weight": 0.7,
    "min_score": 0.0,  # passed with each search: a plain absolute floor, i.e. no cut-off
}
CONFIGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "baseline": BASELINE,
    "cut-off off": {"min_score": 0.0},
    "relative cut 0.3": {"relative_min_score": 0.3},
    "relative cut 0.7": {"relative_min_score": 0.7},
    "old cut-off (min_score 0.35 absolute)": {"min_score": 0.35},
    "decay off": {"decay": "off"},
    "decay multiplicative": {"decay": "multiplicative"},
    "MMR off": {"mmr": False},
    "MMR lambda 0.85": {"mmr_lambda": 0.85},
    "MEMORY.md weight off": {"memory_weight": 1.0},
    "sessions mixed in": {"sessions_below_notes": False},
    "CJK vector weight off": {"cjk_vector_weight": 0.7},
}


def evaluate(memory: Any, ws: Path, questions: list[Question], config: dict[str, Any]) -> dict[str, Any]:
    settings = memory.settings.search
    saved = {k: getattr(settings, k, None) for k in config if k != "min_score"}
    for k, v in config.items():
        if k != "min_score":
            setattr(settings, k, v)
    lines: dict[str, list[str]] = {}
    ranks: list[int | None] = []
    cost: list[int] = []
    newest: list[int] = []
    empty = session_above = 0
    per_cat: dict[str, list[int]] = {}
    try:
        for q in questions:
            out = memory.search(q.text, max_results=10, min_score=config.get("min_score"), today=TODAY)
            results = out.results
            empty += not results
            rank = next((i for i, h in enumerate(results) if holds(ws, lines, h, q.answer)), None)
            ranks.append(rank)
            per_cat.setdefault(q.category, []).append(int(rank is not None and rank < 5))
            cost += [h.end_line - h.start_line + 1 for h in results[:5]]
            if q.older:
                first = next(
                    (st for h in results for st in [q.answer, *q.older] if holds(ws, lines, h, st)), None
                )
                newest.append(int(first is q.answer))
            if q.session:
                s_rank = next((i for i, h in enumerate(results) if h.path == q.session), None)
                session_above += s_rank is not None and (rank is None or s_rank < rank)
    finally:
        for k, v in saved.items():
            setattr(settings, k, v)
    n = len(questions)
    return {
        "hit@1": sum(r == 0 for r in ranks) / n,
        "hit@5": sum(r is not None and r < 5 for r in ranks) / n,
        "mrr@10": mean([1 / (r + 1) if r is not None and r < 10 else 0.0 for r in ranks]),
        "lines_per_result": mean(cost),
        "newest_first": mean(newest),
        "empty_rate": empty / n,
        "session_above_rate": session_above / max(1, sum(bool(q.session) for q in questions)),
        "hit@5_by_category": {c: sum(v) / len(v) for c, v in per_cat.items()},
        "misses": [q.text for q, r in zip(questions, ranks, strict=True) if r is None or r >= 5],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default="keyword,hybrid")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names of CONFIGS")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--label", default="", help="a prefix for the rows (e.g. before)")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--workdir", default="/tmp/mnemo-bench/recall")
    parser.add_argument("--name", default="recall")
    args = parser.parse_args(argv)

    from mnemo.services import build_services

    files, questions = build(args.seed)
    m = machine()
    rows: list[dict[str, Any]] = []
    for mode in [x.strip() for x in args.modes.split(",") if x.strip()]:
        ws = Path(args.workdir) / f"{args.label or 'current'}-{mode}-{args.seed}"
        if ws.exists():
            shutil.rmtree(ws)
        for rel, text in files.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text, encoding="utf-8")
        (ws / "mnemo.toml").write_text(f"[embedding]\nthreads = {args.threads}\n", encoding="utf-8")
        services = build_services(ws, provider="none" if mode == "keyword" else "local")
        if mode == "hybrid":
            install_embedder(
                services, CachingEmbedder(services.memory.embedder, OUT / "cache" / "recall-minilm.npz")
            )
        try:
            services.memory.sync()
            chunks = services.memory.status().chunks
            for name in [x.strip() for x in args.configs.split(",") if x.strip()]:
                r = evaluate(services.memory, ws, questions, CONFIGS[name])
                r.update(mode=mode, config=f"{args.label} {name}".strip(), chunks=chunks)
                rows.append(r)
                print(
                    f"{mode} {name}: hit@5 {r['hit@5']:.3f} mrr {r['mrr@10']:.3f} misses {len(r['misses'])}",
                    file=sys.stderr,
                )
        finally:
            if mode == "hybrid":
                services.memory.embedder.save()
            services.close()
    cols = [
        "mode",
        "configuration",
        "Hit@1",
        "Hit@5",
        "MRR@10",
        "lines/result",
        "newest first",
        "empty answers",
        "session above answer",
    ]
    table = md_table(
        cols,
        [
            [
                r["mode"],
                r["config"],
                r["hit@1"],
                r["hit@5"],
                r["mrr@10"],
                r["lines_per_result"],
                r["newest_first"],
                r["empty_rate"],
                r["session_above_rate"],
            ]
            for r in rows
        ],
    )
    md = (
        f"### Recall development set (seed {args.seed}: {len(files)} files, {len(questions)} questions, "
        f"today = {TODAY})\n\n{table}\n\n{machine_line(m)}\nCommand: `{command_line()}`\n"
    )
    write_outputs(
        f"{args.name}{'-' + args.label if args.label else ''}",
        {"machine": m, "command": command_line(), "results": rows},
        md,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

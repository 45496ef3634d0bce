"""Chat benchmarks: first-token latency of the default local model (SmolLM2-135M-Instruct, Q4_1) and
context assembly time (persona, MEMORY.md, daily notes, skills, recall, transcript tail).

    python benchmarks/bench_chat.py --threads 2 --turns 5

Runs in a copy of workspace-template with keyword-only search (embedding.provider = none), so the figures
are the agent's own, not the embedding model's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from mnemo.agent import Agent, ChatMessage  # noqa: E402
from mnemo.agent.providers.local import LocalChatProvider  # noqa: E402
from mnemo.config import AgentSettings  # noqa: E402
from mnemo.services import build_services  # noqa: E402

QUESTIONS = [
    "What database did we choose for billing?",
    "Where is the server cluster deployed?",
    "Summarise yesterday's meetings.",
    "What did we learn from the staging deploy?",
    "Which skills do you have?",
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--context-window", type=int, default=2048)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="mnemo-bench-chat-"))
    ws = tmp / "ws"
    shutil.copytree(ROOT / "workspace-template", ws)
    (ws / "mnemo.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    services = build_services(ws)
    services.memory.sync()
    cache = Path(os.environ.get("MNEMO_CACHE_DIR", tmp / "cache"))
    provider = LocalChatProvider("", cache, context_window=args.context_window, threads=args.threads)
    t0 = time.perf_counter()
    provider.load()
    load_s = time.perf_counter() - t0
    settings = AgentSettings(context_window=args.context_window, max_tokens=32, threads=args.threads)
    agent = Agent(ws, services.memory, provider, settings)
    session = agent.store.create()

    assembly: list[float] = []
    first_token: list[float] = []
    prompt_tokens: list[int] = []
    tokens_per_s: list[float] = []
    for i in range(args.turns):
        question = QUESTIONS[i % len(QUESTIONS)]
        agent.store.append(session, "user", question)
        t0 = time.perf_counter()
        context = agent.context.build(session, question)
        assembly.append(time.perf_counter() - t0)
        prompt_tokens.append(context.prompt_tokens)
        t0 = time.perf_counter()
        first = None
        count = 0
        stream = provider.stream(context.messages, max_tokens=32, temperature=0.0)
        for _delta in stream:
            count += 1
            if first is None:
                first = time.perf_counter() - t0
        total = time.perf_counter() - t0
        first_token.append(first or total)
        if count > 1 and first is not None:
            tokens_per_s.append((count - 1) / max(1e-9, total - first))
        agent.store.append(session, "assistant", stream.text)
    # A short prompt too: the floor set by the model itself.
    t0 = time.perf_counter()
    stream = provider.stream([ChatMessage("user", "Hi")], max_tokens=4, temperature=0.0)
    next(iter(stream), None)
    short_first = time.perf_counter() - t0

    result = {
        "threads": args.threads,
        "context_window": args.context_window,
        "model": provider.model,
        "load_s": round(load_s, 3),
        "context_assembly_ms_median": round(1000 * statistics.median(assembly), 2),
        "context_assembly_ms_max": round(1000 * max(assembly), 2),
        "prompt_tokens_median": int(statistics.median(prompt_tokens)),
        "first_token_s_median": round(statistics.median(first_token), 3),
        "first_token_s_p90": round(pct(first_token, 0.9), 3),
        "first_token_short_prompt_s": round(short_first, 3),
        "decode_tokens_per_s_median": round(statistics.median(tokens_per_s), 1) if tokens_per_s else None,
        "turns": args.turns,
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=1) if args.json else "\n".join(f"{k:30} {v}" for k, v in result.items()))
    agent.close()
    services.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The session archive on many transcripts: the first run (every finished month summarised) and a second
run (nothing new: unchanged transcripts are not read again).

    python benchmarks/bench_archive.py [--sessions 200] [--messages 50] [--months 10]

Synthetic transcripts (as SessionStore writes them) spread over ``--months`` finished months, extractive
summaries (no model). Prints both runs' wall times, the archives written and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mnemo.agent.archive import SessionArchiver
from mnemo.config import SessionsSettings

WORDS = [
    "billing",
    "postgres",
    "deploy",
    "tomato",
    "pager",
    "rota",
    "backup",
    "frankfurt",
    "cluster",
    "api",
    "review",
    "budget",
]


def _transcripts(root: Path, sessions: int, messages: int, months: int, rng: random.Random) -> None:
    folder = root / "sessions"
    folder.mkdir(parents=True)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    for n in range(sessions):
        events = [{"type": "session", "text": "", "ts": start.isoformat(), "seq": 0, "kind": "private"}]
        for i in range(messages):
            when = start + timedelta(days=rng.randrange(months * 30), seconds=i)
            role = "user" if i % 2 == 0 else "assistant"
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 14)))
            events.append({"type": role, "text": text, "ts": when.isoformat(), "seq": len(events)})
        events[1:] = sorted(events[1:], key=lambda e: str(e["ts"]))
        (folder / f"s{n:05d}.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in events), encoding="utf-8"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--months", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _transcripts(root, args.sessions, args.messages, args.months, random.Random(7))
        archiver = SessionArchiver(root, root / ".mnemo", SessionsSettings(summary="extractive"))
        now = datetime(2026, 12, 1, tzinfo=UTC)
        print(f"load before {os.getloadavg()[0]:.1f}")
        for name in ("first run", "second run"):
            start = time.perf_counter()
            report = archiver.run(now=now)
            took = time.perf_counter() - start
            print(f"{name}: {took:.2f} s, archives written {len(report.months)}, already {report.already}")
        print(f"load after {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

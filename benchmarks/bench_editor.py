"""Editor features: hover latency (core call, warm) and diagnostics time for a large memory file.

Builds a workspace in a temporary folder (a Git repository, so hover includes blame): MEMORY.md plus
daily notes, and one ~100 KB note with planted secrets and links. Keyword mode by default (hover and
diagnostics never call a model; near-duplicates need vectors: pass --provider local to include them).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, machine_line, md_table, mean, percentile


def build(root: Path, size_kb: int, notes: int, seed: int) -> Path:
    rng = random.Random(seed)
    words = [
        "billing",
        "postgres",
        "deploy",
        "staging",
        "review",
        "alice",
        "config",
        "cluster",
        "cache",
        "latency",
        "budget",
    ]
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(
        "# Memory\n\n## Preferences\n- tea\n\n## Decisions\n- Billing uses PostgreSQL.\n", encoding="utf-8"
    )
    for i in range(notes):
        body = "\n".join(f"- {' '.join(rng.choices(words, k=12))}" for _ in range(20))
        (root / "memory" / f"2026-10-{i % 28 + 1:02d}-n{i}.md").write_text(f"# Note {i}\n\n## Log\n{body}\n")
    lines = ["# Big note", ""]
    n = 0
    while sum(len(line) + 1 for line in lines) < size_kb * 1024:
        n += 1
        if n % 40 == 0:
            lines.append(f"## Section {n}")
        if n % 97 == 0:
            lines.append(f"- token ghp_{''.join(rng.choices('abcdefghijkLMNOP0123456789', k=36))}")
        elif n % 53 == 0:
            lines.append(f"- see [old](memory/gone-{n}.md) and [[Note {n % notes}]]")
        else:
            lines.append(f"- {' '.join(rng.choices(words, k=14))}")
    big = root / "memory" / "big.md"
    big.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "mnemo.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    return big


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-kb", type=int, default=100, help="size of the large note (default 100)")
    parser.add_argument("--notes", type=int, default=200, help="other daily notes in the workspace")
    parser.add_argument("--hovers", type=int, default=300, help="hover calls measured after warm-up")
    parser.add_argument("--repeat", type=int, default=5, help="diagnostics runs of the large note")
    parser.add_argument("--provider", choices=["none", "local"], default="none")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    import git

    from mnemo.editor.vcs import MemoryRepo
    from mnemo.services import build_services

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        big = build(root, args.size_kb, args.notes, args.seed)
        for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
            os.environ.setdefault(key, "bench@example.com")
        services = build_services(root, provider=args.provider)
        MemoryRepo(services.workspace).commit(init_repo=True, force=True, message="bench")
        services.memory.sync()
        for query in ("billing postgres", "deploy staging", "cluster latency"):
            services.memory.search(query)
        editor = services.editor
        rel = "memory/big.md"
        total_lines = big.read_text(encoding="utf-8").count("\n")
        rng = random.Random(args.seed)
        editor.insight(rel, 1)  # warm: blame cache, DuckDB
        hover_ms = []
        for _ in range(args.hovers):
            started = time.perf_counter()
            editor.insight(rel, rng.randint(1, total_lines))
            hover_ms.append((time.perf_counter() - started) * 1000)
        text = big.read_text(encoding="utf-8")
        diag_ms, problems = [], []
        for _ in range(args.repeat):
            started = time.perf_counter()
            problems = editor.diagnose(rel, text)
            diag_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        lenses = editor.lenses(rel)
        lens_ms = (time.perf_counter() - started) * 1000
        services.close()
        assert git.Repo(root).head.is_valid()
    kinds = {k: sum(p.kind == k for p in problems) for k in sorted({p.kind for p in problems})}
    rows = [
        [
            "hover (insight, warm)",
            f"{mean(hover_ms):.2f}",
            f"{percentile(hover_ms, 50):.2f}",
            f"{percentile(hover_ms, 95):.2f}",
            args.hovers,
        ],
        [
            f"diagnostics, {len(text) // 1024} KB file",
            f"{mean(diag_ms):.1f}",
            f"{percentile(diag_ms, 50):.1f}",
            f"{percentile(diag_ms, 95):.1f}",
            args.repeat,
        ],
        [f"code lens ({len(lenses)} chunks)", f"{lens_ms:.1f}", "", "", 1],
    ]
    print(machine_line(machine()))
    print(md_table(["measure", "mean ms", "p50 ms", "p95 ms", "runs"], rows))
    print(f"problems found in the large file: {kinds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Time of the keyword terms (mnemo.text.terms) of every Markdown file of a workspace.

    python benchmarks/synthetic.py --files 1000 --lang zh --out /tmp/ws-zh-1000
    python benchmarks/bench_terms.py /tmp/ws-zh-1000 [--rounds 5]

Best of ``--rounds`` passes of ``terms_string`` over each file's whole text, the term cache cleared before
each (a full index meets most pieces once). ``PYTHONPATH`` on another tree's ``server`` measures that tree.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    from mnemo.text import terms

    texts = [p.read_text(encoding="utf-8") for p in sorted(args.workspace.rglob("*.md"))]
    best = float("inf")
    for _ in range(args.rounds):
        terms._PIECE_TERMS.clear()
        started = time.perf_counter()
        for text in texts:
            terms.terms_string(text)
        best = min(best, time.perf_counter() - started)
    print(
        f"{len(texts)} files, {sum(map(len, texts)):,} characters: terms in {1000 * best:.1f} ms (best of {args.rounds})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark mnemo.secrets on a generated Markdown corpus with planted secrets and decoys.

Prints precision / recall (exact value offsets), scan throughput in MB/s over a ~5 MB corpus, the
latency of scanning one ~100 KB note (what editor diagnostics pay on a large file) and of the outbound
filter (``redact_outbound``: the scan plus its decoded / look-alike / joined views) on that note, on
~100 KB of Russian prose with Latin terms and on ~100 KB of notes full of ``%20`` links.

    python benchmarks/bench_secrets.py [--seed 7] [--mb 5] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.append(str(ROOT / "server"))  # after PYTHONPATH: a tree given there is the one measured

from mnemo.policy.outbound import redact_outbound  # noqa: E402
from mnemo.secrets import scan_text  # noqa: E402
from mnemo.secrets.rules import default_ruleset  # noqa: E402
from secrets_corpus import generate_corpus  # noqa: E402


def corpus_of_size(seed: int, megabytes: float) -> list[tuple[str, str, list]]:  # type: ignore[type-arg]
    corpus: list = []  # type: ignore[type-arg]
    size, batch = 0, 0
    while size < megabytes * 1_000_000:
        part = generate_corpus(seed + batch, 50)
        corpus.extend(part)
        size += sum(len(text.encode()) for _, text, _ in part)
        batch += 1
    return corpus


_RUSSIAN = (
    "Сегодня обсудили архитектуру: Python-скрипт читает API-ключ из переменной окружения. "
    "Встреча {n} перенесена на 15:30, ответственный — Ольга, версия 2.{n}.1 выйдет в пятницу.\n"
)
_LINKS = "- [Deploy notes {n}](https://wiki.internal/Deploy%20Notes%20{n}/Step%203%3A%20keys?q=a%20b)\n"


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _outbound_line(big: str, repeat: int) -> str:
    russian = "".join(_RUSSIAN.format(n=n) for n in range(100_000 // len(_RUSSIAN.encode()) + 1))
    links = "".join(_LINKS.format(n=n) for n in range(100_000 // len(_LINKS) + 1))
    figures = [
        f"{name} {_median_ms(lambda t=text: redact_outbound(t), repeat):.1f} ms"
        for name, text in (("note", big), ("russian", russian), ("links", links))
    ]
    return "outbound filter, ~100 KB, median: " + ", ".join(figures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=7, help="corpus seed (default 7)")
    parser.add_argument("--mb", type=float, default=5.0, help="corpus size in MB (default 5)")
    parser.add_argument("--repeat", type=int, default=20, help="runs of the 100 KB scan (default 20)")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    rules = default_ruleset()
    load_s = time.perf_counter() - t0
    corpus = corpus_of_size(args.seed, args.mb)
    n_bytes = sum(len(text.encode()) for _, text, _ in corpus)

    tp = fp = fn = 0
    t0 = time.perf_counter()
    results = [scan_text(text) for _, text, _ in corpus]
    scan_s = time.perf_counter() - t0
    for (_, _text, planted), findings in zip(corpus, results, strict=True):
        got = {(f.start, f.end) for f in findings}
        expected = {(p.start, p.end) for p in planted}
        tp, fp, fn = tp + len(got & expected), fp + len(got - expected), fn + len(expected - got)

    big = ""
    for _, text, _ in corpus:
        if len(big.encode()) >= 100_000:
            break
        big += text + "\n"
    scan_text(big)  # warm-up
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        scan_text(big)
        times.append((time.perf_counter() - t0) * 1000)

    print(f"rules: {len(rules.rules)} loaded in {load_s * 1000:.0f} ms ({len(rules.dropped)} dropped)")
    print(
        f"corpus: {len(corpus)} notes, {n_bytes / 1e6:.2f} MB, {tp + fn} planted secrets (seed {args.seed})"
    )
    print(
        f"precision: {tp / max(1, tp + fp):.4f}  recall: {tp / max(1, tp + fn):.4f}  (tp={tp} fp={fp} fn={fn})"
    )
    print(f"throughput: {n_bytes / 1e6 / scan_s:.2f} MB/s ({scan_s:.2f} s)")
    print(
        f"100 KB note ({len(big.encode()) / 1000:.0f} KB): median {statistics.median(times):.1f} ms, "
        f"max {max(times):.1f} ms over {args.repeat} runs"
    )
    print(_outbound_line(big, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

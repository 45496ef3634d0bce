"""What the memory commands print for a person: progress, an index's report, a search's results
(``--json`` prints the wire shape instead)."""

from __future__ import annotations

import sys
import time
from typing import Any


class ProgressBar:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, label: str = "indexing") -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.label = label

    def __call__(self, done: int, total: int, current: str) -> None:
        now = time.monotonic()
        if done < total and now - self.last < (0.1 if self.tty else 2.0):
            return
        self.last = now
        width = 30
        filled = int(width * done / total) if total else width
        line = f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {current[:40]}"
        if self.tty:
            sys.stderr.write("\r" + line.ljust(100))
            if done >= total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def report_line(report: dict[str, Any]) -> str:
    return (
        f"indexed {report['files_indexed']} changed file(s) of {report['files_seen']}, removed "
        f"{report['files_removed']}; embedded {report['chunks_embedded']} chunk(s), reused "
        f"{report['chunks_reused']} in {report['seconds']:.1f}s"
        f"{' (full rebuild)' if report['rebuilt'] else ''}; searchable after {report['keyword_seconds']:.1f}s"
    )


def print_report(report: dict[str, Any]) -> None:
    print(report_line(report))
    if report["chunks_pending"]:
        print(f"{report['chunks_pending']:,} chunk(s) wait for vectors (searched by keyword meanwhile)")
    for path, file_problem in report["problems"]:
        print(f"warning: {path}: {file_problem}", file=sys.stderr)


def _weights_lines(weights: dict[str, Any]) -> list[str]:
    """The weights a search actually used, for ``--explain`` (unknown keys are shown as they are)."""
    w = dict(weights)
    if not w:
        return []
    vector, text = w.pop("vector", None), w.pop("text", None)
    first = "text only" if not vector else f"vector {vector:.2f} + text {text:.2f}"
    flags = []
    if w.pop("cjkVectorWeight", False):
        flags.append("CJK query: vector weight lowered")
    if not w.pop("vectorEvidence", True) and vector:
        flags.append("vectors not counted as evidence")
    if flags:
        first += f" ({'; '.join(flags)})"
    second = []
    decay, half_life = w.pop("decay", None), w.pop("halfLifeDays", None)
    if decay is not None:
        second.append(f"decay {decay}" + (f" (half-life {half_life:g} days)" if half_life else ""))
    mmr = w.pop("mmr", None)
    second.append("MMR off" if mmr is None else f"MMR lambda {mmr:g}")
    memory_weight = w.pop("memoryWeight", None)
    if memory_weight is not None:
        second.append(f"MEMORY.md x{memory_weight:g} (bounded boost)")
    cut = w.pop("cut", None)
    if cut is not None:
        second.append(f"cut-off {cut}")
    second += [f"{key} {value}" for key, value in w.items()]
    return [f"weights: {first}", f"         {'  '.join(second)}"]


def _explain_hit(parts: dict[str, Any]) -> list[str]:
    vector = "-" if parts["vector"] is None else f"{parts['vector']:.3f}"
    age = "evergreen" if parts["ageDays"] is None else f"{parts['ageDays']:.0f} days"
    boost = parts.get("boost") or 0.0
    lines = [
        f"   vector {vector}  text {parts['text']:.3f} (bm25 {parts['bm25']:.2f})  decay "
        f"{parts['decay']:.3f} ({age}{', superseded' if parts['superseded'] else ''})  weight "
        f"{parts['weight']:g}{f' ({boost:+.3f})' if boost else ''}  mmr rank {parts['mmrRank']}"
    ]
    if parts.get("line"):
        lines.append(f"   answering line: L{parts['line']}")
    reasons = list(parts.get("reasons") or [])
    if parts.get("evidence") is False:
        reasons.append("no real keyword or vector evidence")
    if reasons:
        lines.append(f"   why: {'; '.join(reasons)}")
    return lines


def print_results(outcome: dict[str, Any], explain: bool) -> None:
    """A search outcome in the wire shape (:func:`mnemo.wire.search_outcome`) for a person to read."""
    print(f"mode: {outcome['mode']} ({outcome['provider']} {outcome['model']})".rstrip())
    if explain:
        for line in _weights_lines(outcome.get("weights") or {}):
            print(line)
    for note in outcome["notes"]:
        print(f"note: {note}")
    if not outcome["results"]:
        print("no results")
    for i, hit in enumerate(outcome["results"], start=1):
        print(f"\n{i}. {hit['citation']}  score {hit['score']:.3f}  {hit['heading']}")
        if explain:
            for line in _explain_hit(hit["parts"]):
                print(line)
        for line in hit["snippet"].splitlines()[:6]:
            print(f"   {line}")

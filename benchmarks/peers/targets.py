"""The issue's targets, checked against the figures (so a rerun re-judges them instead of a hand-kept list)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

Check = tuple[str, str, str, Callable[[dict[str, Any], dict[str, Any]], tuple[float, float] | None], float]


def _num(res: dict[str, Any], key: str) -> float | None:
    v = res.get(key)
    if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
        return float(v)
    return None


def _pair(key_m: str, key_p: str) -> Callable[[dict[str, Any], dict[str, Any]], tuple[float, float] | None]:
    def get(m: dict[str, Any], p: dict[str, Any]) -> tuple[float, float] | None:
        a, b = _num(m, key_m), _num(p, key_p)
        return None if a is None or b is None else (a, b)

    return get


# (target, mode, peer, (mnemo value, peer value), mnemo / peer must be at most this)
CHECKS: list[Check] = [
    ("full keyword index >= 2x faster than QMD", "keyword", "qmd", _pair("index_s", "index_s"), 0.5),
    (
        "full keyword index >= 20x faster than OpenClaw",
        "keyword",
        "openclaw",
        _pair("index_s", "index_s"),
        0.05,
    ),
    (
        "edit -> searchable >= 3x faster than QMD (mnemo LSP vs QMD CLI)",
        "*",
        "qmd",
        _pair("edit_lsp_ms", "edit_cli_ms"),
        1 / 3,
    ),
    (
        "edit -> searchable >= 3x faster than QMD (both CLI)",
        "*",
        "qmd",
        _pair("edit_cli_ms", "edit_cli_ms"),
        1 / 3,
    ),
    (
        "edit -> searchable >= 3x faster than QMD (both in-process)",
        "*",
        "qmd",
        _pair("edit_inproc_ms", "edit_inproc_ms"),
        1 / 3,
    ),
    (
        "keyword search p50 below QMD's (in-process)",
        "keyword",
        "qmd",
        _pair("search_p50_ms", "search_p50_ms"),
        1.0,
    ),
    (
        "keyword search p50 below QMD's (mnemo LSP vs QMD CLI)",
        "keyword",
        "qmd",
        _pair("lsp_p50_ms", "cli_p50_ms"),
        1.0,
    ),
    (
        "hybrid search p50 >= 3x faster than QMD (in-process)",
        "hybrid",
        "qmd",
        _pair("search_p50_ms", "search_p50_ms"),
        1 / 3,
    ),
    (
        "hybrid search p50 >= 3x faster than OpenClaw (in-process)",
        "hybrid",
        "openclaw",
        _pair("search_p50_ms", "search_p50_ms"),
        1 / 3,
    ),
    ("peak RSS while indexing below QMD's", "*", "qmd", _pair("index_rss_mb", "index_rss_mb"), 1.0),
]


def rows(results: Sequence[dict[str, Any]]) -> list[list[str]]:
    by: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in results:
        by.setdefault((r["corpus"], r["mode"]), {})[r["system"]] = r
    out: list[list[str]] = []
    for target, mode, peer, get, limit in CHECKS:
        for (corpus, m), systems in by.items():
            if mode not in ("*", m) or "mnemo" not in systems or peer not in systems:
                continue
            pair = get(systems["mnemo"], systems[peer])
            if pair is None:
                out.append([target, f"{corpus} {m}", "—", "no figure (see the table)"])
                continue
            ratio = pair[0] / pair[1] if pair[1] else math.inf
            out.append([target, f"{corpus} {m}", f"{ratio:.2f}", "met" if ratio <= limit else "**not met**"])
    for (corpus, m), systems in by.items():
        if "mnemo" not in systems:
            continue
        mine = _num(systems["mnemo"], "ndcg@10")
        peers = [_num(r, "ndcg@10") for s, r in systems.items() if s != "mnemo"]
        if mine is None or not peers:
            continue
        best = max(v or 0.0 for v in peers)
        verdict = "met" if mine >= best else "**not met**"
        out.append(["nDCG@10 >= the best peer", f"{corpus} {m}", f"{mine:.3f} vs {best:.3f}", verdict])
    return out


def table(results: Sequence[dict[str, Any]]) -> str:
    """One line per target: the sets where it is met and where not, each with mnemo / peer."""
    grouped: dict[str, dict[str, list[str]]] = {}
    for target, where, value, verdict in rows(results):
        g = grouped.setdefault(target, {"met": [], "not": [], "none": []})
        bucket = "met" if verdict == "met" else "none" if value == "—" else "not"
        g[bucket].append(where if value == "—" else f"{where} ({value})")
    lines = ["| target | met on (mnemo / peer) | not met on | no figure |", "|---|---|---|---|"]
    for target, g in grouped.items():
        lines.append(
            f"| {target} | {'; '.join(g['met']) or '—'} | {'; '.join(g['not']) or '—'} | {'; '.join(g['none']) or '—'} |"
        )
    return "\n".join(lines)

"""The memory commands: ``mnemo init``, ``index``, ``search``, ``get``, ``status``.

Each of index/search/get/status asks the workspace's running server first (the editor's, the gateway's
or ``mnemo serve --daemon``: whoever holds the index, over its socket, :func:`mnemo.memory.sharing.ask_writer`).
With none running, search, get and status read alone and load only what they need
(:mod:`mnemo.memory.readonly`: the index read-only, the model only for a query compared with vectors);
when the index must be written first (files changed, no index yet, crash damage) they take the writer's
path (:func:`mnemo.services.build_services`), as ``mnemo index`` always does. Heavy modules are imported
inside the commands, so ``mnemo get`` never loads DuckDB.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo.cli.filters import search_filters
from mnemo.memory.limits import check_max_results

if TYPE_CHECKING:
    from mnemo.memory.readonly import ReadOnlyMemory
    from mnemo.search.results import SearchOutcome
    from mnemo.services import Services

log = logging.getLogger(__name__)

INDEX_TIMEOUT_S = 3600.0
"""How long `mnemo index` waits for a running server's sync (a full rebuild of a large workspace)."""


def template_dir() -> Path:
    from importlib import resources

    packaged = Path(str(resources.files("mnemo") / "templates" / "workspace"))
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "workspace-template"


def cmd_init(args: argparse.Namespace) -> int:
    import shutil

    src = template_dir()
    created = 0
    for item in sorted(src.rglob("*")):
        if item.is_dir():
            continue
        target = args.dir / item.relative_to(src)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(item, target)
        created += 1
    print(f"workspace {args.dir}: {created} file(s) created from the template")
    print(f"next: mnemo index --workspace {args.dir}")
    return 0


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


# -- talking to a running server, or reading alone ------------------------------------------------------
def _read_only(args: argparse.Namespace) -> ReadOnlyMemory:
    """The workspace's configuration and a one-shot reader (nothing opened yet); warns of config problems."""
    from mnemo.services import build_read_only

    memory = build_read_only(args.workspace.resolve(), provider=getattr(args, "provider", None))
    for problem in memory.config_problems:
        print(f"warning: {problem}", file=sys.stderr)
    return memory


def _ask_server(memory: ReadOnlyMemory, op: str, request: dict[str, Any], timeout_s: float = 120.0) -> Any:
    """A running server's answer (None: no server holds this workspace's index)."""
    from mnemo.memory.writer_client import ask_writer

    return ask_writer(memory.path.parent, op, request, timeout_s=timeout_s)


def _writer_services(args: argparse.Namespace) -> Services:
    """The writer's path: the services of this process (it opens, syncs and writes the index)."""
    from mnemo.services import build_services

    return build_services(
        args.workspace.resolve(),
        provider=getattr(args, "provider", None),
        backend=getattr(args, "backend", None),
    )


# -- index ------------------------------------------------------------------------------------------------
def _report_line(report: dict[str, Any]) -> str:
    return (
        f"indexed {report['files_indexed']} changed file(s) of {report['files_seen']}, removed "
        f"{report['files_removed']}; embedded {report['chunks_embedded']} chunk(s), reused "
        f"{report['chunks_reused']} in {report['seconds']:.1f}s"
        f"{' (full rebuild)' if report['rebuilt'] else ''}; searchable after {report['keyword_seconds']:.1f}s"
    )


def _print_report(report: dict[str, Any]) -> None:
    print(_report_line(report))
    if report["chunks_pending"]:
        print(f"{report['chunks_pending']:,} chunk(s) wait for vectors (searched by keyword meanwhile)")
    for path, file_problem in report["problems"]:
        print(f"warning: {path}: {file_problem}", file=sys.stderr)


def _wait_for_server_vectors(memory: ReadOnlyMemory) -> None:
    """Follow a server's background embedding until every chunk has its vector (or it stops)."""
    progress = ProgressBar("embedding")
    while True:
        got = _ask_server(memory, "status", {})
        vectors = (got or {}).get("vectors") or {}
        embedded, chunks = int(vectors.get("embedded", 0)), int(vectors.get("chunks", 0))
        progress(embedded, chunks, "")
        if got is None or embedded >= chunks or not vectors.get("embedding"):
            return
        time.sleep(1.0)


def _print_unchanged(memory: ReadOnlyMemory) -> bool:
    """Say so and return True when the index has nothing to do (checked read-only: a stat per file, no
    writer opened); False when a sync has work or the index needs the writer's path."""
    from mnemo.memory.readonly import WriterNeeded

    started = time.monotonic()
    try:
        found = memory.unchanged()
    except WriterNeeded as why:
        log.info("indexing through the writer: %s", why)
        return False
    seconds = time.monotonic() - started
    report = {
        "files_seen": found.files,
        "files_indexed": 0,
        "files_removed": 0,
        "chunks_embedded": 0,
        "chunks_reused": 0,
        "seconds": seconds,
        "rebuilt": False,
        "keyword_seconds": seconds,
        "chunks_pending": 0,
        "problems": found.problems,
    }
    _print_report(report)
    return True


def cmd_index(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    memory = _read_only(args)
    served = _ask_server(memory, "index", {"full": args.full}, timeout_s=INDEX_TIMEOUT_S)
    if served is not None:
        if args.provider or args.backend:
            print("note: a running server indexed with its own settings", file=sys.stderr)
        _print_report(served)
        if args.wait and served["chunks_pending"]:
            _wait_for_server_vectors(memory)
        return 0
    if not args.full and args.backend in (None, "duckdb") and _print_unchanged(memory):
        return 0
    services = _writer_services(args)
    try:
        report = services.memory.sync(  # may rebuild
            full=args.full,
            progress=ProgressBar(),
            replace="any",
            vectors="wait" if args.wait else "later",
        )
        _print_report(asdict(report))
    finally:
        services.close()
    return 0


# -- search -----------------------------------------------------------------------------------------------
def cmd_search(args: argparse.Namespace) -> int:
    from mnemo import wire
    from mnemo.memory.readonly import WriterNeeded

    check_max_results(args.max_results)  # the core checks these too; here before anything is opened
    filters = search_filters(args)
    memory = _read_only(args)
    request = {
        "query": args.query,
        "maxResults": args.max_results,
        "minScore": args.min_score,
        "sources": args.sources,
        "filters": filters,
        "sync": not args.no_sync,
        "onePerFile": args.one_per_file,
    }
    served = _ask_server(memory, "search", request)
    outcome: SearchOutcome
    if served is not None:
        from mnemo.memory import codec

        outcome = codec.decode_outcome(served)
    else:
        try:
            outcome = memory.search(
                args.query,
                max_results=args.max_results,
                min_score=args.min_score,
                sources=args.sources,
                filters=filters,
                sync=not args.no_sync,
                one_per_file=args.one_per_file,
            )
        except WriterNeeded as why:
            log.info("searching through the index writer: %s", why)
            outcome = _writer_or_stale_search(memory, args, filters)
    if args.json:
        print(json.dumps(wire.search_outcome(outcome), ensure_ascii=False, indent=2))
    else:
        print_results(wire.search_outcome(outcome), args.explain)
    return 0


def _writer_or_stale_search(
    memory: ReadOnlyMemory, args: argparse.Namespace, filters: dict[str, Any] | None
) -> SearchOutcome:
    """The writer's search (it syncs first); when the index cannot be written (a read-only workspace),
    the index as it is, with a warning, if there is one."""
    from mnemo.errors import IndexUnavailable
    from mnemo.memory.readonly import WriterNeeded

    try:
        return _writer_search(args, filters)
    except IndexUnavailable as cannot:
        try:
            outcome = memory.search(
                args.query,
                max_results=args.max_results,
                min_score=args.min_score,
                sources=args.sources,
                filters=filters,
                sync=False,
                one_per_file=args.one_per_file,
            )
        except WriterNeeded:
            raise cannot from None
        print(
            f"warning: {cannot}; searched the index as it is (recent changes may be missing)", file=sys.stderr
        )
        return outcome


def _writer_search(args: argparse.Namespace, filters: dict[str, Any] | None) -> SearchOutcome:
    services = _writer_services(args)
    try:
        if not args.no_sync:  # a read never rebuilds, nor waits for more than a few vectors
            services.memory.sync(progress=ProgressBar(), replace="none", vectors="few")
        return services.memory.search(
            args.query,
            max_results=args.max_results,
            min_score=args.min_score,
            sources=args.sources,
            filters=filters,
            one_per_file=args.one_per_file,
        )
    finally:
        services.close()


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


# -- get and status ---------------------------------------------------------------------------------------
def cmd_get(args: argparse.Namespace) -> int:
    from mnemo import wire
    from mnemo.memory.citations import get_args
    from mnemo.memory.reading import FileLines

    # "memory/a.md#L3-L9" and "memory/a.md:12" read the cited lines
    path, from_line, lines = get_args(args.path, args.from_line, args.lines)
    memory = _read_only(args)
    served = _ask_server(memory, "get", {"path": path, "from": from_line, "lines": lines})
    got = FileLines(**served) if served is not None else memory.get(path, from_line, lines)
    result = wire.file_lines(got)
    print(json.dumps(result, ensure_ascii=False, indent=2) if args.json else result["text"])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from mnemo import wire
    from mnemo.memory import codec
    from mnemo.memory.readonly import WriterNeeded

    memory = _read_only(args)
    served = _ask_server(memory, "status", {})
    if served is not None:
        found = codec.decode_status(served).shared("a running server", "cli")
    else:
        try:
            found = memory.status()
        except WriterNeeded:
            services = _writer_services(args)
            try:
                services.memory.ensure_open()
                found = services.memory.status()
            finally:
                services.close()
    status = wire.index_status(found)
    if args.json:
        print(json.dumps(status, ensure_ascii=False, indent=2))
        return 0
    vectors = status.get("vectors") or {}
    if vectors.get("embedded", 0) < vectors.get("chunks", 0):  # hybrid, 1,240 of 4,100 ...
        status["mode"] += f", {vectors['embedded']:,} of {vectors['chunks']:,} chunks embedded"
    for key in ("workspace", "index", "files", "chunks", "mode", "provider", "model", "dims"):
        print(f"{key:10} {status[key]}")
    if "writer" in status:
        print(f"{'writer':10} {status['writer']}")
    for note in status.get("notes", []):  # e.g. built for another model
        print(f"note: {note}")
    for problem in status["configProblems"]:
        print(f"warning: {problem}")
    return 0

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
from mnemo.cli.printing import ProgressBar, print_report
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
    print_report(report)
    return True


def cmd_index(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    memory = _read_only(args)
    served = _ask_server(memory, "index", {"full": args.full}, timeout_s=INDEX_TIMEOUT_S)
    if served is not None:
        if args.provider or args.backend:
            print("note: a running server indexed with its own settings", file=sys.stderr)
        print_report(served)
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
        print_report(asdict(report))
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
            outcome = _alone_search(memory, args, filters, sync=not args.no_sync)
        except WriterNeeded as why:
            log.info("searching through the index writer: %s", why)
            outcome = _writer_or_stale_search(memory, args, filters)
    if args.json:
        print(json.dumps(wire.search_outcome(outcome), ensure_ascii=False, indent=2))
    else:
        from mnemo.cli.printing import print_results

        print_results(wire.search_outcome(outcome), args.explain)
    return 0


def _alone_search(
    memory: ReadOnlyMemory, args: argparse.Namespace, filters: dict[str, Any] | None, *, sync: bool
) -> SearchOutcome:
    """The one-shot search, the index read-only (WriterNeeded when it must be written first)."""
    return memory.search(
        args.query,
        max_results=args.max_results,
        min_score=args.min_score,
        sources=args.sources,
        filters=filters,
        sync=sync,
        one_per_file=args.one_per_file,
    )


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
            outcome = _alone_search(memory, args, filters, sync=False)
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

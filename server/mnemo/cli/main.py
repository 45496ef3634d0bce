"""The ``mnemo`` command line: a thin front on the core (init, index, search, get, status, serve)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from mnemo import __version__
from mnemo.cli import chat, gateway, policy, security, vcs
from mnemo.cli.filters import add_filter_flags, search_filters
from mnemo.errors import MnemoError
from mnemo.memory.citations import get_args
from mnemo.memory.limits import SOURCES, InvalidInput, check_max_results
from mnemo.workspace.layout import (
    WorkspaceNotFound,
    WorkspacePathError,
    find_workspace,
    named_workspace,
)

EPILOG = """examples:
  mnemo init ~/notes                 create a memory workspace from the template
  mnemo index --workspace ~/notes    index it (the local model is converted on first use)
  cd ~/notes/memory && mnemo status  commands find the workspace upward from the current folder
  mnemo search "what database did we pick" --explain
  mnemo get memory/2026-11-01.md --from 3 --lines 10
  mnemo get memory/2026-11-01.md#L3-L9   the lines a search result cites
  mnemo serve                        LSP on stdio (what VS Code and Neovim start)
"""


def _sources(value: str) -> list[str]:
    chosen = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [part for part in chosen if part not in SOURCES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"expected some of {', '.join(SOURCES)}, got {value!r}")
    return chosen


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workspace",
        "-w",
        type=Path,
        default=None,
        help="memory workspace (default: the nearest folder at or above the current one that has "
        "mnemo.toml, MEMORY.md or .mnemo/)",
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv: debug)")
    p.add_argument("--log-file", type=Path, help="write logs to this file instead of stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mnemo",
        description="Memory-first assistant: Markdown memory indexed into DuckDB, hybrid search, LSP server.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mnemo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("init", help="create a workspace from the template (never overwrites a file)")
    p.add_argument("dir", type=Path, help="folder to create or fill")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("--log-file", type=Path)

    p = sub.add_parser("index", help="bring the index up to date (progress on stderr)")
    _add_common(p)
    p.add_argument("--full", action="store_true", help="rebuild from scratch instead of incrementally")
    wait = p.add_mutually_exclusive_group()
    wait.add_argument(
        "--wait",
        dest="wait",
        action="store_true",
        default=True,
        help="embed every chunk before exiting (the default; the keyword index is committed first, "
        "so search works from the first seconds)",
    )
    wait.add_argument(
        "--no-wait",
        dest="wait",
        action="store_false",
        help="exit once the keyword index is committed; the chunks left without vectors are embedded "
        "by the next `mnemo index` or the editor's server, and searched by keyword meanwhile",
    )
    p.add_argument(
        "--provider", choices=["local", "openai", "use-m3", "none"], help="override embedding.provider"
    )

    p = sub.add_parser("search", help="hybrid search over memory")
    _add_common(p)
    p.add_argument("query", help="what to look for")
    p.add_argument("-k", "--max-results", type=int, help="number of results (default from mnemo.toml: 6)")
    p.add_argument(
        "--min-score",
        type=float,
        help="an absolute floor: drop results scoring below this (default: the calibrated cut-off, "
        "relative to the best hit with real keyword or vector evidence)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON (the memory_search shape)")
    p.add_argument(
        "--explain",
        action="store_true",
        help="show the weights used and each result's score parts and why it moved",
    )
    p.add_argument(
        "--sources",
        type=_sources,
        help="comma-separated: only these sources (memory, skills, sessions; default all)",
    )
    add_filter_flags(p)
    p.add_argument("--no-sync", action="store_true", help="do not update the index first")
    p.add_argument(
        "--provider", choices=["local", "openai", "use-m3", "none"], help="override embedding.provider"
    )

    p = sub.add_parser("get", help="print lines of a memory file")
    _add_common(p)
    p.add_argument(
        "path",
        help="workspace path, e.g. memory/2026-11-01.md, or a citation as search prints it: "
        "memory/2026-11-01.md#L3-L9 (also #L3, :12, :12-20) reads those lines",
    )
    p.add_argument("--from", dest="from_line", type=int, help="first line, 1-based (replaces a citation's)")
    p.add_argument("--lines", type=int, help="number of lines (replaces a citation's)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("status", help="index state, counts, model and problems")
    _add_common(p)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--provider", choices=["local", "openai", "use-m3", "none"], help="override embedding.provider"
    )

    p = sub.add_parser("serve", help="run the language server (stdio by default)")
    _add_common(p)
    p.add_argument("--ws", metavar="HOST:PORT", help="serve LSP over WebSocket instead (loopback by default)")

    # Other command groups (git, chat, policy, gateway, security) add their own subcommands; each sets
    # ``run`` to a function(args) -> exit code.
    for add_commands in (
        vcs.add_commands,
        chat.add_commands,
        policy.add_commands,
        gateway.add_commands,
        security.add_commands,
    ):
        add_commands(sub, _add_common)
    return parser


def _setup_logging(verbose: int, log_file: Path | None) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8") if log_file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


class ProgressBar:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, done: int, total: int, current: str) -> None:
        now = time.monotonic()
        if done < total and now - self.last < (0.1 if self.tty else 2.0):
            return
        self.last = now
        width = 30
        filled = int(width * done / total) if total else width
        line = f"indexing [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {current[:40]}"
        if self.tty:
            sys.stderr.write("\r" + line.ljust(100))
            if done >= total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def template_dir() -> Path:
    packaged = Path(str(resources.files("mnemo") / "templates" / "workspace"))
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "workspace-template"


def cmd_init(args: argparse.Namespace) -> int:
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


def _print_results(outcome: dict[str, Any], explain: bool) -> None:
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


def _run(args: argparse.Namespace) -> int:
    if args.command == "serve":  # answers `initialize` before the core's imports (DuckDB, NumPy)
        from mnemo.lsp.setup import serve

        # Without --workspace the client says which folder it opened (initialize's root).
        return serve(args.workspace.resolve() if args.workspace else None, ws=args.ws)
    from mnemo.services import build_services

    if args.command == "search":  # the core checks these too; here nothing is indexed or opened first
        check_max_results(args.max_results)
        args.filters = search_filters(args)
    if args.command == "get":  # "memory/a.md#L3-L9" and "memory/a.md:12" read the cited lines
        args.path, args.from_line, args.lines = get_args(args.path, args.from_line, args.lines)
    services = build_services(args.workspace.resolve(), provider=getattr(args, "provider", None))
    for problem in services.problems:
        print(f"warning: {problem}", file=sys.stderr)
    memory = services.memory
    try:
        if args.command == "index":
            report = memory.sync(  # may rebuild
                full=args.full,
                progress=ProgressBar(),
                replace="any",
                vectors="wait" if args.wait else "later",
            )
            print(
                f"indexed {report.files_indexed} changed file(s) of {report.files_seen}, removed "
                f"{report.files_removed}; embedded {report.chunks_embedded} chunk(s), reused "
                f"{report.chunks_reused} in {report.seconds:.1f}s{' (full rebuild)' if report.rebuilt else ''}"
                f"; searchable after {report.keyword_seconds:.1f}s"
            )
            if report.chunks_pending:
                print(f"{report.chunks_pending:,} chunk(s) wait for vectors (searched by keyword meanwhile)")
            for path, file_problem in report.problems:
                print(f"warning: {path}: {file_problem}", file=sys.stderr)
            return 0
        if args.command == "search":
            if not args.no_sync:
                # A read never rebuilds, nor waits for more than a few vectors.
                memory.sync(progress=ProgressBar(), replace="none", vectors="few")
            outcome = memory.search(
                args.query,
                max_results=args.max_results,
                min_score=args.min_score,
                sources=args.sources,
                filters=args.filters,
            )
            if args.json:
                print(json.dumps(outcome.as_dict(), ensure_ascii=False, indent=2))
            else:
                _print_results(outcome.as_dict(), args.explain)
            return 0
        if args.command == "get":
            result = memory.get(args.path, args.from_line, args.lines)
            print(json.dumps(result, ensure_ascii=False, indent=2) if args.json else result["text"])
            return 0
        if args.command == "status":
            memory.ensure_open()
            status = memory.status()
            if args.json:
                print(json.dumps(status, ensure_ascii=False, indent=2))
            else:
                vectors = status.get("vectors") or {}
                if vectors.get("embedded", 0) < vectors.get("chunks", 0):  # hybrid, 1,240 of 4,100 ...
                    status["mode"] += f", {vectors['embedded']:,} of {vectors['chunks']:,} chunks embedded"
                for key in ("workspace", "index", "files", "chunks", "mode", "provider", "model", "dims"):
                    print(f"{key:10} {status[key]}")
                for note in status.get("notes", []):  # e.g. built for another model
                    print(f"note: {note}")
                for problem in status["configProblems"]:
                    print(f"warning: {problem}")
            return 0
    finally:
        services.close()
    return 2


def locate_workspace(args: argparse.Namespace) -> None:
    """Set ``args.workspace``: the one named by --workspace, else the nearest one upward from the current
    folder (as Git finds a repository). Raises WorkspaceNotFound: nothing is ever created in a folder that
    is not a workspace. ``mnemo serve`` without --workspace takes its root from the client instead."""
    if not hasattr(args, "workspace"):
        return
    if args.workspace is not None:
        args.workspace = named_workspace(args.workspace)
    elif args.command != "serve":
        ceilings = os.environ.get("MNEMO_CEILING_DIRECTORIES", "")
        args.workspace = find_workspace(Path.cwd(), [Path(c) for c in ceilings.split(os.pathsep) if c])


def _embedding_error() -> type[Exception]:
    """EmbeddingError, imported only when an error reaches :func:`main` (it brings NumPy in)."""
    from mnemo.embeddings import EmbeddingError

    return EmbeddingError


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    _setup_logging(args.verbose, args.log_file)
    try:
        if args.command == "init":
            return cmd_init(args)
        locate_workspace(args)
        if hasattr(args, "run"):
            return int(args.run(args))
        return _run(args)
    except (WorkspaceNotFound, InvalidInput) as exc:  # nothing was done: a usage error
        print(f"mnemo: {exc}", file=sys.stderr)
        return 2
    except (MnemoError, WorkspacePathError, _embedding_error()) as exc:  # evaluated only on an error
        print(f"mnemo: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("mnemo: interrupted", file=sys.stderr)
        return 130

"""The ``mnemo`` command line: the parser and the dispatch. The memory commands (init, index, search,
get, status) live in :mod:`mnemo.cli.memory`, the daemon in :mod:`mnemo.cli.daemon`, the other command
groups in their own modules. A memory command parses without importing those groups, and nothing heavy
is imported before the command runs: a keyword `mnemo search` costs ~0.2 s of CPU end to end alone, ~0.1 s
through a running server (docs/benchmarks.md, twelfth round)."""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
from pathlib import Path
from typing import Any

from mnemo import __version__
from mnemo.cli.filters import add_filter_flags
from mnemo.errors import MnemoError
from mnemo.memory.limits import SOURCES, InvalidInput
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
  mnemo serve --daemon               keep the index warm for scripts (exits after 10 idle minutes)
"""

MEMORY_COMMANDS = ("init", "index", "search", "get", "status", "serve")
"""Commands whose parser is built without the other command groups."""


@functools.cache
def help_width() -> int:
    """What argparse's help is wrapped to: the terminal's width (``COLUMNS`` first) less 2, as argparse
    works it out, but without :func:`shutil.get_terminal_size`: importing shutil brings the compression
    modules (~5 ms of every command), and argparse asks it again at every argument added."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose help formatter gets :func:`help_width`; its subparsers are of this
    class too (``add_subparsers`` makes them of the parser's own class)."""

    def __init__(
        self, *, formatter_class: type[argparse.HelpFormatter] = argparse.HelpFormatter, **kwargs: Any
    ) -> None:
        super().__init__(formatter_class=functools.partial(formatter_class, width=help_width()), **kwargs)


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


def build_parser(*, groups: bool = True) -> argparse.ArgumentParser:
    """The whole command line; ``groups=False`` leaves out the command groups that live in their own
    modules (git, chat, policy, gateway, security): parsing a memory command never imports them."""
    parser = CommandParser(
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
    p.add_argument(
        "--backend", choices=["duckdb", "postgres"], help="override index.backend (postgres: docs/team.md)"
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
        help=f"comma-separated: only these sources ({', '.join(SOURCES)}; default all)",
    )
    add_filter_flags(p)
    p.add_argument(
        "--one-per-file",
        action="store_true",
        default=None,
        help="only the best chunk of each file (default from mnemo.toml: [search] one_per_file)",
    )
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

    p = sub.add_parser(
        "serve", help="run the language server (stdio by default), or a background index server (--daemon)"
    )
    _add_common(p)
    p.add_argument("--ws", metavar="HOST:PORT", help="serve LSP over WebSocket instead (loopback by default)")
    p.add_argument(
        "--daemon",
        action="store_true",
        help="instead of LSP: start a detached process that holds the workspace's index for the command "
        "line (search, get, status and index ask it), keeps it current and embeds in the background; "
        "it exits after --idle-minutes without a request, or when an editor's server takes over",
    )
    p.add_argument(
        "--idle-minutes",
        type=float,
        default=10.0,
        metavar="N",
        help="with --daemon: exit after N minutes without a request and nothing left to embed (default 10)",
    )
    p.add_argument("--daemon-child", action="store_true", help=argparse.SUPPRESS)

    if groups:
        # Other command groups (git, chat, policy, gateway, security) add their own subcommands; each
        # sets ``run`` to a function(args) -> exit code.
        from mnemo.cli import archive, chat, consolidate, gateway, policy, security, vcs

        for add_commands in (
            vcs.add_commands,
            chat.add_commands,
            policy.add_commands,
            gateway.add_commands,
            security.add_commands,
            consolidate.add_commands,
            archive.add_commands,
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


def _run(args: argparse.Namespace) -> int:
    if args.command == "serve":
        if args.daemon or args.daemon_child:
            from mnemo.cli import daemon

            return daemon.run(args)
        quick = None
        if not args.ws:  # `initialize` read, and answered from a record, before pygls loads
            from mnemo.lifeline import Lifeline
            from mnemo.lsp.quick_start import QuickStart

            watch = Lifeline(lambda why: os._exit(0)).start()  # the editor died before its first message
            try:
                quick = QuickStart.read(sys.stdin.buffer, sys.stdout.buffer)
            finally:
                watch.stop()
        from mnemo.lsp.setup import serve  # answers `initialize` before the core's imports (DuckDB, NumPy)

        # Without --workspace the client says which folder it opened (initialize's root).
        return serve(args.workspace.resolve() if args.workspace else None, ws=args.ws, quick=quick)
    from mnemo.cli import memory

    commands = {
        "index": memory.cmd_index,
        "search": memory.cmd_search,
        "get": memory.cmd_get,
        "status": memory.cmd_status,
    }
    return commands[args.command](args) if args.command in commands else 2


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


def _command_word(argv: list[str]) -> str | None:
    """The command named in ``argv`` (its first word that is not an option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # OpenBLAS starts a thread per core when NumPy loads (~0.1 s of CPU); mnemo's matrices are small.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser(groups=_command_word(argv) not in MEMORY_COMMANDS)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    _setup_logging(args.verbose, args.log_file)
    try:
        if args.command == "init":
            from mnemo.cli.memory import cmd_init

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
    except BrokenPipeError:  # `mnemo search ... | head`: the reader has what it wanted
        # Python flushes stdout again at exit, into the same closed pipe: point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command ended by SIGPIPE

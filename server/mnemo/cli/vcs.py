"""``mnemo commit`` and ``mnemo log``: Git for memory files, a thin front on :mod:`mnemo.editor.vcs`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # gitpython loads only for commit and log
    from mnemo.services import Services


def _services(args: argparse.Namespace) -> Services:
    """The composition root's services (only Git is used: the index and the models are never loaded)."""
    from mnemo.cli.common import workspace_services

    return workspace_services(args)


def cmd_commit(args: argparse.Namespace) -> int:
    services = _services(args)
    try:
        result = services.repo.commit(message=args.message, force=args.force, init_repo=args.init)
    finally:
        services.close()
    print(f"[{result.sha[:10]}] {result.message.rstrip()}")
    return 0


def cmd_log(args: argparse.Namespace) -> int:
    from mnemo.memory.citations import parse_citation
    from mnemo.memory.limits import MAX_LINE, InvalidInput

    cited = parse_citation(args.path)  # "MEMORY.md#L12-L14", "MEMORY.md:12": the cited (first) line
    if args.line is not None and not 1 <= args.line <= MAX_LINE:
        raise InvalidInput(f"--line is 1-based and at most {MAX_LINE}, got {args.line}")
    line = args.line if args.line is not None else cited.start
    if args.line is None and cited.start != cited.end:
        print(f"note: history of line {line}, the first line of {cited}", file=sys.stderr)
    services = _services(args)
    try:
        repo = services.repo
        repo.workspace.resolve_memory_path(cited.path)
        entries = repo.history(cited.path, line)
    finally:
        services.close()
    for entry in entries:
        print(f"{entry.sha[:10]} {entry.date[:10]} {entry.author}: {entry.subject}")
    return 0


def add_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser(
        "commit",
        help="commit memory files (MEMORY.md, memory/, skills/) with a message listing changed sections",
    )
    add_common(p)
    p.add_argument("-m", "--message", help="subject line (the summary of changes follows it)")
    p.add_argument("--force", action="store_true", help="commit even when a file holds a secret")
    p.add_argument("--init", action="store_true", help="create a Git repository when there is none")
    p.set_defaults(run=cmd_commit)

    p = sub.add_parser("log", help="Git history of a memory file, or of one line of it")
    add_common(p)
    p.add_argument(
        "path", help="workspace path, e.g. MEMORY.md, or a citation: MEMORY.md#L12 (or :12) is --line 12"
    )
    p.add_argument(
        "--line", type=int, help="only commits that changed this 1-based line (wins over a citation)"
    )
    p.set_defaults(run=cmd_log)

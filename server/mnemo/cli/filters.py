"""``mnemo search`` filter flags: --tag, --kind, --since, --until, --project, --type, --channel (see
mnemo.search.filters).

Kept apart from :mod:`mnemo.cli.main` and free of heavy imports: ``mnemo serve`` must start fast.
"""

from __future__ import annotations

import argparse
from typing import Any

from mnemo.search.filters import KINDS, check_filters


def add_filter_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tag",
        action="append",
        dest="tags",
        metavar="TAG",
        help="only files whose front matter lists this tag (repeatable: every tag given must be there)",
    )
    p.add_argument(
        "--kind",
        action="append",
        dest="kinds",
        metavar="KIND",
        help=f"only these kinds of file (repeatable: any of them): {', '.join(KINDS)}",
    )
    p.add_argument("--since", metavar="YYYY-MM-DD", help="only notes dated on or after this day")
    p.add_argument("--until", metavar="YYYY-MM-DD", help="only notes dated on or before this day")
    p.add_argument("--project", help="only files whose front matter says project: PROJECT")
    p.add_argument("--channel", help="only session archives of this channel (editor, telegram, slack...)")
    p.add_argument(
        "--type", dest="note_type", metavar="TYPE", help="only files whose front matter says type: TYPE"
    )


def search_filters(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``filters`` object of the flags given (checked: a bad date raises InvalidInput), else None."""
    raw: dict[str, Any] = {
        "tags": args.tags,
        "kinds": args.kinds,
        "since": args.since,
        "until": args.until,
        "project": args.project,
        "type": args.note_type,
        "channel": args.channel,
    }
    raw = {key: value for key, value in raw.items() if value is not None}
    return raw if check_filters(raw) is not None else None

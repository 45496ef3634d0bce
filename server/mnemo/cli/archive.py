"""``mnemo archive``: summarise each finished month of the chat sessions into ``sessions/<key>/YYYY-MM.md``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mnemo import wire

if TYPE_CHECKING:
    from mnemo.agent.archive import ArchiveReport

EPILOG = """\
Each finished month (UTC) of each conversation (the editor's and the terminal's sessions, or one channel
and peer or group of the gateway) becomes sessions/<private|group>-<key>/YYYY-MM.md: a summary (by the
chat model when one is configured, else extractive: counts and recurring topics) and key excerpts quoted
with links to their turns. A month is summarised once; a deleted archive is not written again unless its
month is named with --month. Transcripts stay (unless [sessions] keep_raw = false). A conversation marked
private is archived only with consent:

  mnemo archive --mark-private SESSION    never archive it (unless consent is given)
  mnemo archive --consent SESSION         archive it although it is marked private

The editor's server and the gateway run this at most once a day ([sessions] auto_archive)."""


def add_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser(
        "archive",
        help="archive finished months of the chat sessions as Markdown summaries (sessions/<key>/YYYY-MM.md)",
        description="Archive each finished month of the chat sessions as a Markdown summary.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(p)
    p.add_argument("--month", metavar="YYYY-MM", help="only this finished month, written again if it exists")
    p.add_argument("--dry-run", action="store_true", help="say what would be archived; write nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    marks = p.add_argument_group("marks on a session (nothing is archived when one is given)")
    marks.add_argument("--mark-private", metavar="SESSION", help="mark a conversation private")
    marks.add_argument("--unmark-private", metavar="SESSION", help="take the private mark off")
    marks.add_argument("--consent", metavar="SESSION", help="consent to archive a private conversation")
    marks.add_argument("--no-consent", metavar="SESSION", help="withdraw that consent")
    p.set_defaults(run=run_archive)


def _marks(args: argparse.Namespace) -> list[tuple[str, dict[str, bool]]]:
    given = (
        (args.mark_private, {"private": True}),
        (args.unmark_private, {"private": False}),
        (args.consent, {"archive": True}),
        (args.no_consent, {"archive": False}),
    )
    return [(session_id, flags) for session_id, flags in given if session_id]


def run_archive(args: argparse.Namespace) -> int:
    from mnemo.cli.common import workspace_services

    services = workspace_services(args)
    try:
        marks = _marks(args)
        if marks:
            return _mark(services, marks, args.json)
        # The index picks the files up at its next sync (`mnemo search` syncs first; so do the servers).
        report = services.archive(args.month, dry_run=args.dry_run, reindex=False)
        assert report is not None
        if args.json:
            print(json.dumps(wire.archive_report(report), ensure_ascii=False, indent=2))
        else:
            _print(report)
        return 0
    finally:
        services.close()


def _mark(services: Any, marks: list[tuple[str, dict[str, bool]]], as_json: bool) -> int:
    from mnemo.agent.sessions import SessionStore

    store = SessionStore(services.workspace.root)
    out = []
    for session_id, flags in marks:
        now = store.mark(session_id, **flags)
        out.append(wire.session_flags(session_id, now))
        if not as_json:
            state = "private" if now.get("private") else "not private"
            consent = "archive consent given" if now.get("archive") else "no archive consent"
            print(f"{session_id}: {state}, {consent}")
    if as_json:
        print(json.dumps(out, ensure_ascii=False, indent=2))
    return 0


def _print(report: ArchiveReport) -> None:
    verb = "would archive" if report.dry_run else "archived"
    for m in report.months:
        who = m.channel + (f" {m.peer}" if m.peer else "")
        print(
            f"{verb} {m.path}  ({m.context}, {who}; {len(m.sessions)} conversation(s), "
            f"{m.messages} message(s); summary: {m.summary})"
        )
        for note in m.notes:
            print(f"  note: {note}")
    for session_id, why in report.skipped:
        print(f"skipped {session_id}: {why}")
    for path in report.removed:
        print(f"{'would remove' if report.dry_run else 'removed'} {path} (keep_raw = false)")
    done = f"{len(report.months)} month(s) {verb}, {report.already} archived before"
    print(done + (" (dry run: nothing written)" if report.dry_run else ""))

"""``mnemo consolidate`` (near-duplicate memories across files, one line each) and ``mnemo feedback``
(whether a chat turn's recalled memories helped): thin fronts on :mod:`mnemo.editor.consolidator` and
:mod:`mnemo.memory.feedback`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mnemo.editor.consolidator import Proposal

CONSOLIDATE_EPILOG = """\
Lines of MEMORY.md and memory/**/*.md in different files that say nearly the same thing (their words
overlap at least [memory] consolidate_threshold, or their chunks are near-duplicates by vector) form a
cluster. Each cluster becomes one line, where the most durable copy is (MEMORY.md, a topic note, the newest
daily note): merged by the chat model when one is configured (checked: one line, no new words), else the
newest copy's text; the other copies are removed. The diff is printed; files are written only with
--apply, and only if they did not change meanwhile."""

FEEDBACK_EPILOG = """\
A turn is a message sent with chat (1 = the session's first); without --turn, the latest. The feedback
is recorded on every memory chunk the turn's searches returned (automatic recall and memory_search
tool calls). --harvest records what the transcript says by itself: a tool call that succeeded, and
whether the next message went on or said the answer was wrong. With [search] usefulness_weight > 0
the tallies nudge ranking (off by default; docs/benchmarks.md, "Feedback")."""


def add_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser(
        "consolidate",
        help="merge near-duplicate memories across files (prints the diff; --apply writes it)",
        description="Find near-duplicate memory lines across files and propose one line for each cluster.",
        epilog=CONSOLIDATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(p)
    p.add_argument("--apply", action="store_true", help="write the proposed changes (after printing them)")
    p.add_argument("--no-model", action="store_true", help="keep the newest copy; never ask the chat model")
    p.add_argument("--json", action="store_true", help="print the clusters and the diff as JSON")
    p.set_defaults(run=cmd_consolidate)

    p = sub.add_parser(
        "feedback",
        help="say whether a chat turn's recalled memories helped (or --harvest the transcript's signals)",
        epilog=FEEDBACK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(p)
    p.add_argument("session", help="session id (as `mnemo sessions` lists it)")
    p.add_argument("--turn", type=int, help="1-based turn (default: the latest)")
    verdict = p.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--useful", dest="useful", action="store_true", help="the answer helped (thumbs up)")
    verdict.add_argument(
        "--not-useful", dest="not_useful", action="store_true", help="it did not (thumbs down)"
    )
    verdict.add_argument("--harvest", action="store_true", help="record the transcript's implicit signals")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_feedback)


def _print_proposal(proposal: Proposal) -> None:
    for note in proposal.notes:
        print(f"note: {note}")
    if not proposal.merges:
        print("no near-duplicate memories across files")
        return
    how = f" (merged by {proposal.model})" if proposal.model else ""
    print(f"{len(proposal.merges)} cluster(s) of near-duplicate memories{how}:")
    for i, merge in enumerate(proposal.merges, start=1):
        print(f"\n{i}. keep {merge.keep.citation} ({merge.how}): {merge.new_line.strip()}")
        if merge.note:
            print(f"   note: {merge.note}; kept the newest copy")
        for m in merge.removed:
            print(f"   remove {m.citation}: {m.text.strip()}")
    print()
    sys.stdout.write(proposal.diff())


def cmd_consolidate(args: argparse.Namespace) -> int:
    from mnemo import wire
    from mnemo.cli.common import workspace_services
    from mnemo.errors import IndexBusy

    services = workspace_services(args)
    try:
        try:  # fresher vectors for the near-duplicate chunks; another process may hold the index
            services.memory.sync(replace="none", vectors="few")
        except IndexBusy as exc:
            print(f"note: {exc}", file=sys.stderr)
        proposal = services.consolidator(use_model=not args.no_model).propose()
        if args.json:
            print(json.dumps(wire.consolidation(proposal), ensure_ascii=False, indent=2))
        else:
            _print_proposal(proposal)
        if not proposal.merges:
            return 0
        if not args.apply:
            if not args.json:
                print("\nnothing written; review the diff, then run again with --apply to write it")
            return 0
        written = services.consolidator(use_model=False).apply(proposal)
        print(
            f"wrote {len(written)} file(s): {', '.join(written)}",
            file=sys.stderr if args.json else sys.stdout,
        )
        return 0
    finally:
        services.close()


def cmd_feedback(args: argparse.Namespace) -> int:
    from mnemo import wire
    from mnemo.cli.common import workspace_services
    from mnemo.memory.limits import InvalidInput

    if args.turn is not None and args.turn < 1:
        raise InvalidInput(f"--turn is 1-based, got {args.turn}")
    services = workspace_services(args)
    try:
        book = services.memory.feedback
        if args.harvest:
            results = book.harvest(args.session)
        else:
            results = [book.record(args.session, args.turn, bool(args.useful))]
        if args.json:
            print(json.dumps([wire.feedback_result(r) for r in results], ensure_ascii=False, indent=2))
            return 0
        if not results:
            print(f"session {args.session}: no new signal to record")
        for r in results:
            verdict = "useful" if r.useful else "not useful"
            print(f"session {r.session_id} turn {r.turn}: {verdict} ({r.signal}) on {len(r.chunks)} chunk(s)")
            for c in r.chunks:
                print(f"   {c.path}#L{c.start_line}-L{c.end_line}")
        return 0
    finally:
        services.close()

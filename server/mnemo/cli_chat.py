"""``mnemo chat`` (a terminal chat on the same core as the editor) and ``mnemo flush``."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from typing import Any

from mnemo.errors import MnemoError

HELP = "commands: /new  /reset  /flush  /quit   (Ctrl-C stops a reply; Ctrl-D quits)"


def add_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser(
        "chat", help="chat with the agent in the terminal (streaming; /new /reset /flush /quit)"
    )
    add_common(p)
    p.add_argument("--session", help="continue this session id (default: a new session)")
    p.add_argument("--group", action="store_true", help="a group session: MEMORY.md is never loaded")
    p.add_argument("-m", "--message", help="send one message, print the reply and exit")
    p.add_argument("--no-sync", action="store_true", help="do not update the memory index first")
    p.set_defaults(run=run_chat)

    p = sub.add_parser("flush", help="save a session's durable memories to today's daily note now")
    add_common(p)
    p.add_argument("--session", required=True, help="session id (see sessions/*.jsonl)")
    p.set_defaults(run=run_flush)


def _build(args: argparse.Namespace) -> Any:
    from mnemo.services import build_services

    services = build_services(args.workspace.resolve())
    for problem in services.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return services


def _say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _turn(agent: Any, message: str, session_id: str, kind: str) -> Any:
    cancel = threading.Event()
    try:
        reply = agent.chat(message, session_id, kind=kind, on_delta=_say, cancel=cancel)
    except KeyboardInterrupt:
        cancel.set()
        _say("\n[stopped]\n")
        return None
    _say("\n")
    for citation in reply.citations:
        print(f"  [{citation['citation']}]", file=sys.stderr)
    for note in reply.notes:
        print(f"  note: {note}", file=sys.stderr)
    return reply


def run_chat(args: argparse.Namespace) -> int:
    services = _build(args)
    try:
        if not args.no_sync:
            services.memory.sync()
        agent = services.agent
        kind = "group" if args.group else "private"
        session_id = agent.open_session(args.session, kind)
        if args.message:
            return 0 if _turn(agent, args.message, session_id, kind) is not None else 130
        print(f"session {session_id} ({kind}); {HELP}", file=sys.stderr)
        while True:
            try:
                line = input("> ").strip()
            except EOFError:
                print(file=sys.stderr)
                return 0
            except KeyboardInterrupt:
                print(file=sys.stderr)
                continue
            if not line:
                continue
            if line in ("/quit", "/exit"):
                return 0
            if line == "/help":
                print(HELP, file=sys.stderr)
                continue
            try:
                reply = _turn(agent, line, session_id, kind)
            except MnemoError as exc:
                print(f"mnemo: {exc}", file=sys.stderr)
                continue
            if reply is not None:
                session_id = reply.session_id
    finally:
        services.close()


def run_flush(args: argparse.Namespace) -> int:
    services = _build(args)
    try:
        report = services.agent.flush(args.session)
    finally:
        services.close()
    if report.no_reply:
        print("nothing worth keeping (NO_REPLY)")
    for path in report.written:
        print(f"kept {report.kept} item(s) in {path}")
    for refused in report.refused:
        print(f"refused: {refused}", file=sys.stderr)
    return 0

"""``mnemo chat`` (a terminal chat on the same core as the editor) and ``mnemo flush``."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import queue
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from mnemo import wire
from mnemo.errors import MnemoError
from mnemo.workspace.layout import WORKSPACE_DIR

HELP = (
    "commands: /new  /reset  /flush  /quit   (Ctrl-C stops a reply, not the chat; Ctrl-D quits;"
    " a line typed while a reply streams steers it)"
)


def add_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser(
        "chat", help="chat with the agent in the terminal (streaming; /new /reset /flush /quit)"
    )
    add_common(p)
    p.add_argument(
        "--session", help="continue this session id (default: a new session; see `mnemo sessions`)"
    )
    p.add_argument("--group", action="store_true", help="a group session: MEMORY.md is never loaded")
    p.add_argument(
        "-m", "--message", help="send one message, print the reply, then `session: <id>` on stderr"
    )
    p.add_argument("--json", action="store_true", help="with -m: print the whole reply as JSON, no streaming")
    p.add_argument("--no-sync", action="store_true", help="do not update the memory index first")
    p.add_argument(
        "--steer",
        action="store_true",
        help="lines read while a reply streams steer it (default when stdin is a terminal)",
    )
    p.set_defaults(run=run_chat)

    p = sub.add_parser("flush", help="save a session's durable memories to today's daily note now")
    add_common(p)
    p.add_argument("--session", required=True, help="session id (see `mnemo sessions`)")
    p.add_argument(
        "--dry-run", action="store_true", help="show what would be kept and rejected; write nothing"
    )
    p.add_argument("--json", action="store_true", help="print the flush report as JSON")
    p.set_defaults(run=run_flush)

    p = sub.add_parser("sessions", help="list chat sessions (id, last update, messages, title)")
    add_common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_sessions)


def _build(args: argparse.Namespace) -> Any:
    from mnemo.cli.common import workspace_services

    return workspace_services(args)


def _say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _run_cancellable(work: Callable[[threading.Event], Any], poll: Callable[[], None] | None = None) -> Any:
    """Run ``work(cancel)`` on a worker thread; Ctrl-C sets ``cancel`` (the turn stops at its next
    token) instead of interrupting the program; ``poll`` is called every 50 ms meanwhile (steering).
    Returns what ``work`` returned, or raises what it raised."""
    cancel = threading.Event()
    done = threading.Event()  # not Thread.join: a join interrupted by Ctrl-C can misreport the thread
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work(cancel)
        except BaseException as exc:  # handed to the main thread below
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="mnemo-chat-turn", daemon=True).start()
    while not done.is_set():
        try:
            done.wait(0.05)
            if poll is not None:
                poll()
        except KeyboardInterrupt:
            if not cancel.is_set():
                cancel.set()
                _err("\n[stopping]")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _turn(
    agent: Any,
    message: str,
    session_id: str,
    kind: str,
    *,
    live: bool = True,
    poll: Callable[[], None] | None = None,
) -> Any:
    """One chat turn, streamed (``live``) or its final text printed once (``mnemo chat -m`` into a
    pipe: what a script reads is what was kept); citations, notes and the finish on stderr. When the
    kept text differs from what streamed (a trimmed loop, the memory line grounding quoted first), it
    is shown too."""
    streamed: list[str] = []

    def on_delta(delta: str) -> None:
        streamed.append(delta)
        if live:
            _say(delta)

    reply = _run_cancellable(
        lambda cancel: agent.chat(message, session_id, kind=kind, on_delta=on_delta, cancel=cancel),
        poll,
    )
    if not live:
        _say(reply.text)
    elif reply.text.strip() != "".join(streamed).strip():
        _say("\n--- kept as:\n" + reply.text)
    _say("\n")
    if reply.finish_reason == "cancelled":
        _err("[stopped]")
    elif reply.finish_reason == "loop":
        _err("  note: the reply was stopped because it started repeating itself")
    for citation in reply.citations:
        _err(f"  [{citation.citation}]")
    for note in reply.notes:
        _err(f"  note: {note}")
    if reply.flush is not None:  # /flush, or the automatic flush before compaction
        _print_flush(reply.flush, sys.stderr, summary=reply.text != reply.flush.summary())
    return reply


def _history(root: Path) -> None:
    """Line editing and history (``.mnemo/chat_history``) when a person types at a terminal."""
    if not sys.stdin.isatty():
        return
    try:
        import readline
    except ImportError:  # pragma: no cover - platforms without readline
        return
    path = root / WORKSPACE_DIR / "chat_history"
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(1000)

    def save() -> None:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(path)
            path.chmod(0o600)

    atexit.register(save)


def run_chat(args: argparse.Namespace) -> int:
    services = _build(args)
    try:
        agent = services.agent
        if args.session and not agent.store.exists(args.session):
            _err(f"mnemo: no session {args.session} (list them with `mnemo sessions`)")
            return 2
        if not args.no_sync:
            services.memory.sync()
        kind = "group" if args.group else "private"
        session_id = agent.open_session(args.session, kind)
        _say_model(agent)
        if args.message:
            return _one_message(agent, args, session_id, kind)
        _history(args.workspace.resolve())
        _err(f"session: {session_id} ({kind}); {HELP}")
        return _interactive(agent, session_id, kind, steer=args.steer or sys.stdin.isatty())
    finally:
        services.close()


def _say_model(agent: Any) -> None:
    """Which model answers (stderr), and for the bundled one how to connect a real one."""
    info = agent.model_info()
    _err(info.line())
    if info.note:
        _err(f"  note: {info.note}")


def _one_message(agent: Any, args: argparse.Namespace, session_id: str, kind: str) -> int:
    if args.json:
        reply = _run_cancellable(
            lambda cancel: agent.chat(args.message, session_id, kind=kind, cancel=cancel)
        )
        print(json.dumps(wire.chat_reply(reply), ensure_ascii=False, indent=2))
    else:
        reply = _turn(agent, args.message, session_id, kind, live=sys.stdout.isatty())
        _err(f"session: {reply.session_id}")
    return 130 if reply.finish_reason == "cancelled" else 0


class _Lines:
    """Reads stdin on a thread. With ``read_ahead`` (steering) a line typed while a reply streams
    arrives at once; without, a line is read only when the chat asks for one (a pipe's lines stay
    turns). ``None`` is the end of input."""

    def __init__(self, prompt: str, read_ahead: bool) -> None:
        self.prompt = prompt
        self.read_ahead = read_ahead
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.idle = threading.Event()  # no turn runs: the prompt is shown
        self.wanted = threading.Event()  # the chat asks for a line (without read_ahead)
        self.handled = threading.Event()  # the chat took the last line (with read_ahead)
        self.prompted = False  # the reader shows the prompt itself
        threading.Thread(target=self._read, name="mnemo-chat-stdin", daemon=True).start()

    def _read(self) -> None:
        while True:
            if not self.read_ahead:
                self.wanted.wait()
                self.wanted.clear()
            self.prompted = self.idle.is_set()
            try:
                line = input(self.prompt if self.prompted else "")
            except (EOFError, OSError, ValueError):
                self.lines.put(None)
                return
            self.lines.put(line)
            if self.read_ahead:
                self.handled.wait()
                self.handled.clear()

    def next(self) -> str | None:
        """The next line for a new turn (Ctrl-C while waiting raises KeyboardInterrupt)."""
        self.idle.set()
        if self.read_ahead and not self.prompted and self.lines.empty():
            _say(self.prompt)  # the reader was already waiting, without one
            self.prompted = True
        self.wanted.set()
        while True:
            try:
                return self.lines.get(timeout=0.1)
            except queue.Empty:
                continue

    def took(self, turn: bool, *, read: bool = True) -> None:
        """The chat took a line (``turn``: a turn runs now, so the next read shows no prompt;
        ``read``: the line came from :meth:`next`, whose reader waits for this)."""
        if turn:
            self.idle.clear()
        if read:
            self.handled.set()

    def waiting(self) -> list[str | None]:
        """Lines typed meanwhile (a turn runs), each acknowledged."""
        got: list[str | None] = []
        while True:
            try:
                got.append(self.lines.get_nowait())
            except queue.Empty:
                return got
            self.handled.set()


def _steerer(agent: Any, session_id: str, lines: _Lines, later: deque[str | None]) -> Callable[[], None]:
    """While a turn runs: each line typed goes to :meth:`Agent.steer` and is echoed as ``(steering)``;
    commands, the end of input and a line that finds no turn (``idle``) wait in ``later``."""

    def poll() -> None:
        for line in lines.waiting():
            text = line.strip() if line is not None else None
            if text is None or text.startswith("/"):
                later.append(text)
                continue
            if not text:
                continue
            try:
                state = agent.steer(session_id, text)
            except MnemoError as exc:  # the turn holds too many already
                _err(f"mnemo: {exc}")
                continue
            if state == "idle":
                later.append(text)
            else:
                _err(f"(steering) {text}" + (" [after compaction]" if state == "queued" else ""))

    return poll


def _interactive(agent: Any, session_id: str, kind: str, *, steer: bool = False) -> int:
    lines = _Lines("> " if sys.stdin.isatty() else "", read_ahead=steer)
    later: deque[str | None] = deque()
    while True:
        read = not later
        if later:
            raw = later.popleft()
        else:
            try:
                raw = lines.next()
            except KeyboardInterrupt:
                _err("")
                continue
        if raw is None:
            return 0
        line = raw.strip()
        if line in ("/quit", "/exit"):
            return 0
        if not line or line == "/help":
            if line:
                _err(HELP)
            lines.took(turn=False, read=read)
            continue
        lines.took(turn=True, read=read)
        poll = _steerer(agent, session_id, lines, later) if steer else None
        try:
            reply = _turn(agent, line, session_id, kind, poll=poll)
        except MnemoError as exc:
            _err(f"mnemo: {exc}")
            continue
        if reply.session_id != session_id:
            session_id = reply.session_id
            _err(f"session: {session_id}")


def _print_flush(report: Any, out: TextIO, *, summary: bool = True) -> None:
    """The flush report for a person: the summary, then each item kept and each rejected, with why."""
    if summary:
        print(report.summary(), file=out)
    for item in report.items:
        print(f"  keep: {item.text}  ({item.source}, turn {item.turn})", file=out)
    for rejected in report.rejected:
        print(f"  reject: {rejected.text}  -- {rejected.reason}", file=out)
    for refused in report.refused:
        print(f"  refused: {refused}", file=out)


def run_flush(args: argparse.Namespace) -> int:
    services = _build(args)
    try:
        report = _run_cancellable(
            lambda cancel: services.agent.flush(args.session, cancel, dry_run=args.dry_run)
        )
    finally:
        services.close()
    if args.json:
        print(json.dumps(wire.flush_report(report), ensure_ascii=False, indent=2))
    else:
        _print_flush(report, sys.stdout)
    return 1 if report.refused else 0


def run_sessions(args: argparse.Namespace) -> int:
    services = _build(args)
    try:
        found = services.agent.sessions()
    finally:
        services.close()
    if args.json:
        print(json.dumps(wire.sessions(found), ensure_ascii=False, indent=2))
        return 0
    for s in sorted(found, key=lambda s: s.updated):
        print(f"{s.session_id}  {s.updated[:16]}  {s.messages:>3} msg  {s.title[:60]}")
    return 0

"""``mnemo gateway``: serve the agent and memory to chat channels over an authenticated WebSocket."""

from __future__ import annotations

import _thread
import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mnemo.gateway.core import ChatResult
    from mnemo.gateway.server import Gateway
    from mnemo.lifeline import Lifeline
    from mnemo.memory.sharing import SharedMemory
    from mnemo.services import Services

log = logging.getLogger(__name__)

STOP_DEADLINE_S = 15.0
"""Once asked to stop, the gateway ends within this long, whatever its worker threads are doing."""

DESCRIPTION = """\
Serve the workspace's agent and memory to chat channels: JSON-RPC 2.0 over a WebSocket at
ws://HOST:PORT/rpc (default 127.0.0.1:18789), a signed HTTP webhook at /hooks/<account>, and the
channel plugins enabled in mnemo.toml ([gateway.channels.*]).

Auth is challenge-response; no secret crosses the wire. Secrets come from the environment
(MNEMO_GATEWAY_TOKEN: admin; MNEMO_GATEWAY_PASSWORD: user) or mnemo.toml, never from the command
line. With neither, the gateway makes a token file (mode 0600, path printed at start) and listens
on loopback only; a non-loopback --host is refused until a secret is configured.

The editor's server and the gateway can run on one workspace at once: one of them writes the index,
the other asks it. See docs/gateway.md.

Stopping: SIGTERM, SIGINT and SIGHUP stop it cleanly (exit 0). When its stdin is a pipe or socket, it
also stops when the other end closes it (the process that started it quit or died); with
--exit-with-parent it stops when its parent process goes. Under systemd (stdin /dev/null) neither applies.
"""


def add_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser(
        "gateway",
        help="serve the agent and memory to chat channels (authenticated WebSocket JSON-RPC)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(p)
    p.add_argument("--host", help="address to listen on (default: [gateway] host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: [gateway] port, 18789; 0 picks a free one)")
    p.add_argument(
        "--check", action="store_true", help="print the effective settings and channel states, then exit"
    )
    p.add_argument("--no-sync", action="store_true", help="do not index the workspace at start")
    p.add_argument(
        "--exit-with-parent", action="store_true", help="stop when the process that started it goes away"
    )
    p.set_defaults(run=run_gateway)


def _sync_loop(
    shared: SharedMemory, stop: threading.Event, every_s: float, daily: Callable[[], None] | None = None
) -> None:
    """While this process writes the index, pick up files changed by others (agents, channels, git);
    ``daily``: the session archive's check (it runs at most once a day)."""
    while not stop.wait(every_s):
        if daily is not None:
            daily()
        try:
            shared.sync_if_writer()
        except Exception as exc:  # the gateway keeps serving; the next round retries
            log.warning("index sync failed: %s", exc)


def run_gateway(args: argparse.Namespace) -> int:
    from mnemo.server_malloc import tune_for_server

    tune_for_server()  # before the gateway's threads allocate
    parent = os.getppid() if args.exit_with_parent else None  # before the slow start-up: it may die meanwhile
    stopping = _Stopping()
    lifeline = _start_lifeline(stopping, parent)  # watching from here: start-up can take seconds under load
    from mnemo.cli.common import workspace_services
    from mnemo.gateway.auth import default_token_file, ensure_token_file  # (imports too: ~1 s under load)
    from mnemo.gateway.constraints import server_ssl_context
    from mnemo.gateway.server import Gateway, check_bind
    from mnemo.gateway.settings import load_gateway_settings

    root = args.workspace.resolve()
    settings, problems = load_gateway_settings(root)
    for problem in problems:
        print(f"warning: mnemo.toml: {problem}", file=sys.stderr)
    host = args.host or settings.host
    tls = server_ssl_context(root, settings.tls_cert, settings.tls_key)  # a bad cert: exit 1, said plainly
    check_bind(host, settings.auth.configured, tls=tls is not None, require_tls=settings.require_tls)
    token_file = None
    if not settings.auth.configured:
        token_file = default_token_file()
        settings.auth.token = ensure_token_file(token_file)
        settings.auth.generated = True
    services = workspace_services(args)
    shared = services.share_index("gateway")  # first: the agent then searches through it too
    if not args.no_sync:
        shared.on_writer = lambda: _quiet_sync(shared)
    gateway = Gateway(
        root,
        settings,
        services.agent,
        shared,  # the agent's memory too (Services.process_memory): the writer's index when following
        services.memory.indexer.dir / "gateway-sessions.json",
        approvals=services.approvals,  # the agent's tool gate asks this queue; admins answer over RPC
        tools=services.agent.tools.plugins,  # plugin tools (plugins/, mnemo.tools), gated like exec
    )
    gateway.core.after_turn = lambda reply: _reindex_if_written(shared, reply)
    gateway.core.archive = lambda month, dry_run: services.archive(month, dry_run=dry_run)
    if args.check:
        print(f"workspace  {root}\nlisten     {host}:{settings.port if args.port is None else args.port}")
        print(
            f"auth       {', '.join(gateway.auth.methods())}"
            + (f" (token file {token_file})" if token_file else "")
        )
        print(f"agents     {', '.join(a.id for a in settings.agents)} (default {settings.default_agent})")
        print(f"tls        {'on (wss://, https://)' if tls else 'off (ws://)'}")
        print(f"allow_from {', '.join(settings.allow_from) or 'any address'}")
        for role, rules in settings.roles.items():
            print(f"role       {role}: allow {rules.allow or '-'}, deny {rules.deny or '-'}")
        for state in gateway.channel_states():
            print(
                f"channel    {state['name']}: {state['state']} {state.get('problem', state.get('endpoint', ''))}"
            )
        services.close()
        return 0
    writer = shared.start()
    stop = threading.Event()
    daily = _DailyArchive(services)
    threading.Thread(target=_sync_loop, args=(shared, stop, 15.0, daily), daemon=True).start()
    try:
        return asyncio.run(_serve(gateway, host, args.port, token_file, writer, stopping))
    except KeyboardInterrupt:  # the parent went away (or stdin closed) during start-up
        return 0
    finally:
        lifeline.stop()
        stop.set()
        services.close()


class _DailyArchive:
    """The gateway's session archive run: checked each round of the sync loop, run at most once a day
    (the archive's state says whether any process, the editor's server included, ran it today)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.checked = ""

    def __call__(self) -> None:
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        if self.checked == today or not self.services.settings.sessions.auto_archive:
            return
        self.checked = today
        try:
            report = self.services.archive(due_only=True)
        except Exception as exc:  # the gateway keeps serving; tomorrow tries again
            log.warning("the daily session archive failed: %s", exc)
            return
        if report is not None and report.months:
            log.info("archived %d month(s) of sessions", len(report.months))


def _reindex_if_written(shared: SharedMemory, reply: ChatResult) -> None:
    """A turn whose tools ran or that flushed memory may have written files: have the writer re-index."""
    if reply.tool_calls or reply.flush is not None:
        shared.changed()


def _quiet_sync(shared: SharedMemory) -> None:
    from mnemo.embeddings import prepare

    prepare(shared.memory.embedder)  # the model before the index: its one-time peak while small
    try:
        report = shared.sync_if_writer()  # (an editor's server may have taken the index meanwhile)
    except Exception as exc:
        log.warning("index sync failed: %s", exc)
        return
    if report is not None:
        log.info("index up to date: %d file(s) indexed of %d", report.files_indexed, report.files_seen)


class _Stopping:
    """Where the lifeline's "gone" goes: during start-up it interrupts the main thread (with a deadline),
    once serving it sets the loop's stop event."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._serving: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    def serving(self, loop: asyncio.AbstractEventLoop, stopped: asyncio.Event) -> None:
        with self._lock:
            self._serving = (loop, stopped)

    def gone(self, reason: str) -> None:
        from mnemo.lifeline import exit_by

        print(f"mnemo gateway: {reason}", file=sys.stderr, flush=True)
        with self._lock:
            serving = self._serving
        if serving is not None:
            serving[0].call_soon_threadsafe(serving[1].set)
            return
        exit_by(STOP_DEADLINE_S)  # a start-up step stuck in C code must not keep it alive
        _thread.interrupt_main()


def _start_lifeline(stopping: _Stopping, parent: int | None) -> Lifeline:
    from mnemo.lifeline import Lifeline

    lifeline = Lifeline(stopping.gone, parent=parent)
    if lifeline.watch_stdin_hangup() or parent is not None:
        lifeline.start()
    return lifeline


async def _serve(
    gateway: Gateway, host: str, port: int | None, token_file: Any, writer: bool, stopping: _Stopping
) -> int:
    from mnemo.lifeline import exit_by

    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stopped.set)
    stopping.serving(loop, stopped)
    bound = await gateway.start(host, port)
    scheme = "wss" if gateway.settings.tls_cert else "ws"
    print(
        f"mnemo gateway on {scheme}://{host}:{bound}/rpc (workspace {gateway.root})",
        file=sys.stderr,
        flush=True,
    )
    if token_file:
        print(f"auth: token in {token_file} (mode 0600)", file=sys.stderr, flush=True)
    print(
        "index: " + ("this process writes it" if writer else "another mnemo process writes it; asking it"),
        file=sys.stderr,
        flush=True,
    )
    await stopped.wait()
    exit_by(STOP_DEADLINE_S)  # a chat turn on a worker thread must not keep a stopped gateway alive
    print("mnemo gateway: stopping", file=sys.stderr, flush=True)
    await gateway.stop()
    return 0

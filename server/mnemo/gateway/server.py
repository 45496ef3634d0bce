"""The gateway process: an aiohttp application with the JSON-RPC WebSocket, webhooks and channels.

``GET /health`` (no auth, no details), ``GET /rpc`` (WebSocket, JSON-RPC 2.0, see :mod:`.rpc`), and
whatever routes the enabled channels mount (``POST /hooks/<account>`` for the webhook channel).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from mnemo import __version__, wire
from mnemo.agent.sessions import SessionStore
from mnemo.errors import MnemoError
from mnemo.policy.hosts import is_loopback_host

from .auth import Authenticator
from .channels.base import BUILT_IN, Channel, ChannelError, load_channel_class
from .constraints import AddressFilter, server_ssl_context
from .core import ChatAgent, GatewayCore, GatewayReply
from .lanes import UserSlots
from .plugins import PluginManager, ToolRegistry
from .routing import InboundMessage
from .rpc import RpcFront
from .session_table import SessionTable
from .settings import GatewaySettings

if TYPE_CHECKING:
    from mnemo.memory.reading import FileLines
    from mnemo.memory.status import IndexStatus
    from mnemo.memory.turns import FeedbackResult
    from mnemo.policy.approvals import ApprovalQueue, ApprovalRequest
    from mnemo.search.results import SearchOutcome

log = logging.getLogger(__name__)


class MemoryReader(Protocol):
    """What the gateway reads of memory (:class:`mnemo.memory.sharing.SharedMemory`)."""

    def search(self, query: str, *, max_results: int | None = None, filters: Any = None) -> SearchOutcome: ...
    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> FileLines: ...
    def status(self) -> IndexStatus: ...
    def record_feedback(self, session_id: str, turn: int | None, useful: bool) -> FeedbackResult: ...


class MemoryFailed(MnemoError):
    """The memory service raised (a DuckDB error, a bug): answered as an error, the gateway goes on."""


class BindRefused(MnemoError):
    """A non-loopback address without configured auth."""


def check_bind(host: str, auth_configured: bool, *, tls: bool = False, require_tls: bool = False) -> None:
    if is_loopback_host(host, resolve=True):  # a name counts when all its addresses are loopback
        return
    if not auth_configured:
        raise BindRefused(
            f"refusing to listen on {host}, which other machines can reach, without auth: set "
            "MNEMO_GATEWAY_TOKEN or MNEMO_GATEWAY_PASSWORD (or [gateway.auth] in mnemo.toml) first"
        )
    if require_tls and not tls:
        raise BindRefused(
            f"refusing to listen on {host}, which other machines can reach, without TLS: set "
            "gateway.tls_cert and gateway.tls_key in mnemo.toml (or gateway.require_tls = false when a "
            "TLS proxy in front of it terminates the connections)"
        )


class Gateway:
    """Wires auth, the core (routing, lanes, sessions), the RPC front and the channels."""

    def __init__(
        self,
        root: Path,
        settings: GatewaySettings,
        agent: ChatAgent,
        memory: MemoryReader,
        table_path: Path,
        approvals: ApprovalQueue | None = None,
        tools: ToolRegistry | None = None,
    ) -> None:
        """``tools``: where plugin tools go (the agent's ``tools.plugins``); None: plugins give channels only."""
        self.root = root
        self.settings = settings
        self.version = __version__
        self.memory = memory
        self.auth = Authenticator(settings.auth)
        self.core = GatewayCore(settings, agent, SessionTable(table_path))
        self.approvals = approvals
        self.rpc = RpcFront(settings, self.auth, self.core, self, approvals, self.version)
        self.channels: dict[str, Channel] = {}
        self.channel_problems: dict[str, str] = {}
        self.memory_slots = UserSlots(settings.max_memory_calls_per_user)
        for problem in self.rpc.setting_problems:
            log.warning("mnemo.toml: %s", problem)
        self.address_filter = AddressFilter(settings.allow_from)
        self.app = web.Application(
            client_max_size=settings.max_frame_bytes, middlewares=[self.address_filter.middleware]
        )
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/rpc", self.rpc.handle_ws)
        self._load_channels()
        self.plugins = PluginManager(root / "plugins", self, tools, settings.channels)
        self.app.router.register_resource(self.plugins.routes)  # after every other route
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if approvals is not None:
            approvals.add_asker(self._show_approval)

    # -- approvals: shown to admin connections, answered with approvals.resolve ------------------------
    def _show_approval(self, request: ApprovalRequest) -> Callable[[], object] | None:
        """Called from the agent's worker thread when a tool call needs approval."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return None
        loop.call_soon_threadsafe(self.rpc.notify_admins, "approval.request", wire.approval_request(request))

        def withdraw() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(self.rpc.notify_admins, "approval.closed", {"id": request.id})

        return withdraw

    # -- ChannelHost ----------------------------------------------------------------------------------
    async def dispatch(
        self, message: InboundMessage, *, on_delta: Callable[[str], None] | None = None
    ) -> GatewayReply:
        return await self.core.handle(message, on_delta=on_delta)

    def secret(self, channel: str, config: dict[str, Any], key: str, env_default: str) -> str:
        env_name = str(config.get(f"{key}_env") or env_default)
        return os.environ.get(env_name) or str(config.get(key) or "")

    def check_address(self, address: str) -> None:
        self.auth.limiter.check(address)

    def auth_failed(self, address: str) -> None:
        log.warning("failed channel authentication from %s", address)
        self.auth.limiter.fail(address)

    # -- channels ---------------------------------------------------------------------------------------
    def _load_channels(self) -> None:
        for name, config in self.settings.channels.items():
            if not config.get("enabled", True) or name not in BUILT_IN:
                continue  # the others come from plugins (entry points, plugins/): self.plugins runs them
            try:
                channel = load_channel_class(name)(self, config)
            except ChannelError as exc:
                self.channel_problems[name] = str(exc)
                log.warning("channel %s is off: %s", name, exc)
                continue
            channel.mount(self.app)
            self.channels[name] = channel

    def channel_states(self) -> list[dict[str, Any]]:
        states = [{**c.describe(), "state": "on"} for c in self.channels.values()]
        states += [{"name": n, "state": "off", "problem": p} for n, p in self.channel_problems.items()]
        return states + self.plugins.channel_states(set(BUILT_IN))

    async def reload_plugins(self) -> dict[str, Any]:
        return await self.plugins.reload()

    def plugin_states(self) -> list[dict[str, Any]]:
        return self.plugins.states_list()

    # -- memory and sessions (blocking work off the event loop) ---------------------------------------
    async def memory_search(
        self, query: str, max_results: int | None, *, user: str = "", filters: Any = None
    ) -> dict[str, Any]:
        with self.memory_slots.slot(user):
            outcome = await self._memory_call(
                "memory.search", self.memory.search, query, max_results=max_results, filters=filters
            )
        return wire.search_outcome(outcome)

    async def memory_get(
        self, path: str, start: int | None, lines: int | None, *, user: str = ""
    ) -> dict[str, Any]:
        with self.memory_slots.slot(user):
            got: FileLines = await self._memory_call("memory.get", self.memory.get, path, start, lines)
        return wire.file_lines(got)

    async def feedback(
        self, session_id: str, turn: int | None, useful: bool, *, user: str = ""
    ) -> dict[str, Any]:
        with self.memory_slots.slot(user):
            done = await self._memory_call(
                "chat.feedback", self.memory.record_feedback, session_id, turn, useful
            )
        return wire.feedback_result(done)

    async def _memory_call(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a memory call in a worker thread; anything else it raises (a DuckDB internal error, a bug)
        is logged and becomes :class:`MemoryFailed`, answered as an error: the process goes on."""
        try:
            return await asyncio.to_thread(call, *args, **kwargs)
        except (MnemoError, ValueError, asyncio.CancelledError):  # the caller's mistake, said plainly
            raise
        except Exception as exc:
            log.exception("%s failed", what)
            raise MemoryFailed(f"{what} failed: {type(exc).__name__}: {exc}") from exc

    async def history(self, session_key: str, limit: int) -> dict[str, Any]:
        entry = self.core.table.get(session_key)
        if entry is None:
            return {"sessionKey": session_key, "messages": []}
        store = SessionStore(self.root)
        limit = max(1, min(limit, 500))

        def read() -> list[dict[str, Any]]:
            if not store.exists(entry.session_id):
                return []
            events = store.load(entry.session_id).events
            turns = [e for e in events if e.get("type") in ("user", "assistant")]
            return [{"role": e["type"], "text": e.get("text", ""), "ts": e.get("ts")} for e in turns[-limit:]]

        return {
            "sessionKey": session_key,
            "sessionId": entry.session_id,
            "messages": await asyncio.to_thread(read),
        }

    async def status(self) -> dict[str, Any]:
        memory = await asyncio.to_thread(self.memory.status)
        return {
            "version": self.version,
            "workspace": str(self.root),
            "lanes": self.core.stats(),
            "connections": len(self.rpc.connections),
            "channels": self.channel_states(),
            "plugins": self.plugin_states(),
            "memory": wire.index_status(memory),
        }

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    # -- running ----------------------------------------------------------------------------------------
    async def start(self, host: str | None = None, port: int | None = None) -> int:
        """Listen; returns the port (useful with port 0)."""
        host = host or self.settings.host
        tls = self.ssl_context()
        check_bind(
            host, self.settings.auth.configured, tls=tls is not None, require_tls=self.settings.require_tls
        )
        self._loop = asyncio.get_running_loop()
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, self.settings.port if port is None else port, ssl_context=tls)
        await site.start()
        for channel in self.channels.values():
            await channel.start()
        await self.plugins.start()
        return int(self._runner.addresses[0][1])

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of ``tls_cert``/``tls_key`` (None: plain ws://); TlsSettingsError when unusable."""
        return server_ssl_context(self.root, self.settings.tls_cert, self.settings.tls_key)

    async def stop(self) -> None:
        await self.plugins.stop()
        for channel in self.channels.values():
            try:
                await channel.stop()
            except Exception:  # stopping one channel must not keep the others running
                log.exception("channel %s did not stop cleanly", channel.name)
        for conn in list(self.rpc.connections):
            await conn.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
        self.core.close()

"""The gateway's JSON-RPC 2.0 methods over WebSocket (``/rpc``): login, chat, memory, sessions, admin.

Each connection starts as a guest that may only call ``health``, ``auth.challenge`` and ``auth.login``;
the role its login grants (or a lower one it asks for) decides the rest (:data:`~.auth.PERMISSIONS`).
Requests run concurrently per connection, so a long ``chat.send`` never holds up a ``health``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import WSMsgType, web

from mnemo import wire
from mnemo.errors import MnemoError
from mnemo.memory.citations import get_args
from mnemo.memory.limits import InvalidInput, check_max_results
from mnemo.search.filters import check_filters

from .auth import Authenticator, AuthError, Challenge, RateLimited, lower_role, role_allows
from .channels.webchat import webchat_message
from .constraints import role_table
from .core import GatewayCore, MessageTooLarge
from .lanes import LaneFull, UserBusy
from .settings import GatewaySettings

if TYPE_CHECKING:
    from mnemo.policy.approvals import ApprovalQueue

log = logging.getLogger(__name__)

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
SERVER_ERROR, FORBIDDEN, AUTH_FAILED, BUSY, RATE_LIMITED = -32000, -32001, -32002, -32003, -32029


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass(eq=False)
class Connection:
    ws: web.WebSocketResponse
    address: str
    role: str | None = None
    principal: str = ""
    challenge: Challenge | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if not self.ws.closed:
            await self.ws.send_str(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}))


Handler = Callable[["Connection", dict[str, Any]], Awaitable[Any]]


def _params(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], dict):
        return raw[0]
    raise RpcError(INVALID_PARAMS, "params must be an object (named parameters)")


def _text(params: dict[str, Any], key: str, *, required: bool = True) -> str:
    value = params.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise RpcError(INVALID_PARAMS, f"'{key}' must be a non-empty string")
    return value


def _bounded(value: str, key: str, limit: int, setting: str) -> str:
    """``value`` when it is at most ``limit`` characters; INVALID_PARAMS naming the limit otherwise."""
    if len(value) > limit:
        raise RpcError(
            INVALID_PARAMS,
            f"'{key}' is {len(value)} characters; this gateway accepts at most {limit} (gateway.{setting})",
            {"limit": limit, "length": len(value)},
        )
    return value


class GatewayCalls(Protocol):
    """The gateway's own work that RPC methods answer with (:class:`mnemo.gateway.server.Gateway`)."""

    async def memory_search(
        self, query: str, max_results: int | None, *, user: str = "", filters: Any = None
    ) -> dict[str, Any]: ...

    async def memory_get(
        self, path: str, start: int | None, lines: int | None, *, user: str = ""
    ) -> dict[str, Any]: ...

    async def history(self, session_key: str, limit: int) -> dict[str, Any]: ...

    async def feedback(
        self, session_id: str, turn: int | None, useful: bool, *, user: str = ""
    ) -> dict[str, Any]: ...

    async def status(self) -> dict[str, Any]: ...

    def channel_states(self) -> list[dict[str, Any]]: ...

    async def reload_plugins(self) -> dict[str, Any]: ...

    def plugin_states(self) -> list[dict[str, Any]]: ...


class RpcFront:
    """The JSON-RPC methods; given what they use (settings, auth, the core, the gateway's calls, the
    approval queue), not the gateway that owns them."""

    def __init__(
        self,
        settings: GatewaySettings,
        auth: Authenticator,
        core: GatewayCore,
        calls: GatewayCalls,
        approvals: ApprovalQueue | None,
        version: str,
    ) -> None:
        self.settings, self.auth, self.core, self.calls = settings, auth, core, calls
        self.approvals, self.version = approvals, version
        self.methods: dict[str, Handler] = {
            "health": self.health,
            "auth.challenge": self.challenge,
            "auth.login": self.login,
            "whoami": self.whoami,
            "chat.send": self.chat_send,
            "chat.history": self.chat_history,
            "chat.feedback": self.chat_feedback,
            "sessions.list": self.sessions_list,
            "sessions.reset": self.sessions_reset,
            "sessions.archive": self.sessions_archive,
            "memory.search": self.memory_search,
            "memory.get": self.memory_get,
            "routes.list": self.routes_list,
            "routes.resolve": self.routes_resolve,
            "channels.list": self.channels_list,
            "status": self.status,
            "approvals.list": self.approvals_list,
            "approvals.resolve": self.approvals_resolve,
            "plugins.list": self.plugins_list,
            "plugins.reload": self.plugins_reload,
        }
        self.connections: set[Connection] = set()
        self.permissions, self.setting_problems = role_table(settings.roles, self.methods)

    # -- transport ----------------------------------------------------------------------------------
    async def handle_ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=self.settings.max_frame_bytes, heartbeat=30)
        await ws.prepare(request)
        conn = Connection(ws, request.remote or "?")
        self.connections.add(conn)
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                task = asyncio.create_task(self._answer(conn, msg.data))
                conn.tasks.add(task)
                task.add_done_callback(conn.tasks.discard)
        finally:
            self.connections.discard(conn)
            for task in list(conn.tasks):
                task.cancel()
        return ws

    async def _answer(self, conn: Connection, data: str) -> None:
        request_id: Any = None
        try:
            try:
                message = json.loads(data)
            except ValueError as exc:
                raise RpcError(PARSE_ERROR, f"not JSON: {exc}") from exc
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                raise RpcError(INVALID_REQUEST, "expected one JSON-RPC 2.0 request object")
            request_id = message.get("id")
            method = message.get("method")
            if not isinstance(method, str) or method not in self.methods:
                raise RpcError(METHOD_NOT_FOUND, f"unknown method {method!r}")
            if not role_allows(conn.role, method, self.permissions):
                raise RpcError(
                    FORBIDDEN,
                    f"{method} is not allowed for "
                    + (f"role {conn.role}" if conn.role else "a connection that has not logged in"),
                )
            result = await self.methods[method](conn, _params(message.get("params")))
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except RpcError as exc:
            reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": exc.code, "message": exc.message}}
            if exc.data is not None:
                reply["error"]["data"] = exc.data
        except asyncio.CancelledError:
            raise
        except (LaneFull, UserBusy) as exc:
            reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": BUSY, "message": str(exc)}}
        except MessageTooLarge as exc:
            error = {
                "code": INVALID_PARAMS,
                "message": str(exc),
                "data": {"limit": exc.limit, "length": exc.length},
            }
            reply = {"jsonrpc": "2.0", "id": request_id, "error": error}
        except (MnemoError, OSError, ValueError) as exc:
            reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": SERVER_ERROR, "message": str(exc)}}
        except Exception as exc:  # a bug must not take the connection down
            log.exception("gateway method failed")
            reply = {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": SERVER_ERROR, "message": repr(exc)},
            }
        if request_id is not None and not conn.ws.closed:
            await conn.ws.send_str(json.dumps(reply, ensure_ascii=False))

    # -- auth ---------------------------------------------------------------------------------------
    async def health(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "version": self.version, "loggedIn": conn.role is not None}

    async def challenge(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        conn.challenge, public = self.auth.challenge()
        return public

    async def login(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        challenge, conn.challenge = conn.challenge, None  # one login per challenge, right or wrong
        try:
            granted = self.auth.login(
                challenge, _text(params, "method"), _text(params, "proof"), conn.address
            )
        except RateLimited as exc:
            raise RpcError(RATE_LIMITED, str(exc), {"retryAfter": round(exc.retry_after_s, 1)}) from exc
        except AuthError as exc:
            log.warning("failed gateway login from %s: %s", conn.address, exc)
            raise RpcError(AUTH_FAILED, str(exc)) from exc
        asked = params.get("role")
        conn.role = lower_role(granted, asked if isinstance(asked, str) else None)
        conn.principal = str(params.get("name") or f"{params['method']}@{conn.address}")[:120]
        return {"role": conn.role, "principal": conn.principal}

    async def whoami(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"role": conn.role, "principal": conn.principal, "address": conn.address}

    # -- chat and memory ----------------------------------------------------------------------------
    async def chat_send(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        _text(params, "text")  # its length is bounded by the core (MessageTooLarge), for every channel
        message = webchat_message(params, conn.principal)
        loop = asyncio.get_running_loop()
        stream = bool(params.get("stream", True))

        def on_delta(delta: str) -> None:
            if stream:
                asyncio.run_coroutine_threadsafe(
                    conn.notify("chat.delta", {"delta": delta, "peer": message.peer}), loop
                )

        reply = await self.core.handle(message, on_delta=on_delta, force_group=conn.role == "guest")
        return wire.gateway_reply(reply)

    async def chat_feedback(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        """Whether a turn of a session's answer helped: ``{"sessionKey", "turn"?, "useful"}``."""
        from mnemo.memory.turns import FeedbackError

        entry = self.core.table.get(_text(params, "sessionKey"))
        if entry is None:
            raise RpcError(INVALID_PARAMS, "no such session key")
        useful, turn = params.get("useful"), params.get("turn")
        if not isinstance(useful, bool):
            raise RpcError(INVALID_PARAMS, "'useful' must be true or false")
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 1):
            raise RpcError(INVALID_PARAMS, "'turn' is 1-based: a whole number >= 1")
        try:
            return await self.calls.feedback(entry.session_id, turn, useful, user=conn.principal)
        except FeedbackError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from exc

    async def chat_history(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self.calls.history(_text(params, "sessionKey"), int(params.get("limit", 50)))

    async def memory_search(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        query = _bounded(_text(params, "query"), "query", self.settings.max_query_chars, "max_query_chars")
        try:
            limit = check_max_results(params.get("maxResults"))
            filters = params.get("filters")
            extra = {"filters": filters} if check_filters(filters) is not None else {}  # JSON, checked
        except InvalidInput as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from exc
        return await self.calls.memory_search(query, limit, user=conn.principal, **extra)

    async def memory_get(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        try:
            path, start, lines = get_args(_text(params, "path"), params.get("from"), params.get("lines"))
        except InvalidInput as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from exc
        return await self.calls.memory_get(path, start, lines, user=conn.principal)

    # -- sessions and admin -------------------------------------------------------------------------
    async def sessions_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"sessions": self.core.table.list()}

    async def sessions_reset(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        entry = self.core.table.reset(_text(params, "sessionKey"))
        if entry is None:
            raise RpcError(INVALID_PARAMS, "no such session key")
        return {"sessionKey": entry.key, "sessionId": entry.session_id}

    async def sessions_archive(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        """Archive the finished months of the sessions now (admin; the gateway also does it daily)."""
        run = self.core.archive
        if run is None:
            raise RpcError(SERVER_ERROR, "this gateway has no session archive")
        month, dry_run = params.get("month"), params.get("dryRun", False)
        if (month is not None and not isinstance(month, str)) or not isinstance(dry_run, bool):
            raise RpcError(INVALID_PARAMS, "'month' must be a string YYYY-MM and 'dryRun' true or false")
        try:
            report = await asyncio.to_thread(run, month, dry_run)
        except InvalidInput as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from exc
        assert report is not None
        return wire.archive_report(report)

    async def routes_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        s = self.settings
        return {
            "defaultAgent": s.default_agent,
            "agents": [a.id for a in s.agents],
            "routes": [{"agent": r.agent, **r.match} for r in s.routes],
        }

    async def routes_resolve(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        message = webchat_message(params, str(params.get("peer") or "anonymous"))
        message.channel = str(params.get("channel") or "webchat")
        for key, attr in (("guild", "guild"), ("team", "team"), ("parentThread", "parent_thread")):
            setattr(message, attr, str(params.get(key, "")))
        route = self.core.router.resolve(message)
        return {
            "agent": route.agent,
            "sessionKey": route.session_key,
            "matchedBy": route.matched_by,
            "kind": route.kind,
        }

    async def channels_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"channels": self.calls.channel_states()}

    async def status(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self.calls.status()

    async def plugins_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"plugins": self.calls.plugin_states()}

    async def plugins_reload(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        log.info("plugins.reload by %s", conn.principal)
        return await self.calls.reload_plugins()

    # -- approvals (admin) ----------------------------------------------------------------------------
    def notify_admins(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to every admin connection (on the event loop)."""
        for conn in list(self.connections):
            if conn.role == "admin":
                task = asyncio.ensure_future(conn.notify(method, params))
                conn.tasks.add(task)
                task.add_done_callback(conn.tasks.discard)

    async def approvals_list(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        queue = self.approvals
        return {"approvals": [] if queue is None else [wire.approval_request(r) for r in queue.pending()]}

    async def approvals_resolve(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        from mnemo.policy.approvals import parse_choice

        queue = self.approvals
        if queue is None:
            raise RpcError(INVALID_PARAMS, "this gateway has no approval queue")
        try:
            choice = parse_choice(params.get("choice"))
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from exc
        resolved = queue.resolve(_text(params, "id"), choice, by=f"gateway:{conn.principal}")
        return {"resolved": resolved}

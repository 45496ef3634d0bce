"""Plugins loaded without restart: agent tools and channel adapters, registered and unregistered live.

:class:`PluginManager` loads the sources of :mod:`.plugin_sources` (the workspace's ``plugins/*.py``, the
``mnemo.tools`` and ``mnemo.channels`` entry points) when the gateway starts, on ``plugins.reload`` (RPC,
admin) and when the folder changes (polled every :data:`POLL_S` seconds). A reload loads what is new or
changed, unregisters what is gone, and keeps what did not change. A source that fails (its code raises,
a tool or channel does not fit its interface, a name is taken, a channel fails to start) is reported in
the reload result, ``plugins.list`` and ``status``, and never stops the gateway; when a changed source
fails, its previous version stays registered (state ``stale``).

Tools go into the agent's :class:`~mnemo.agent.tool_plugins.PluginTools`, so every call passes the
policy gate. A plugin channel runs when ``[gateway.channels.<name>]`` enables it, like the built-in ones;
its HTTP routes (``mount(app)``) go on an application of its own that :class:`PluginRoutes` consults
after the gateway's own routes, so routes can come and go while the server runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web
from aiohttp.web_urldispatcher import AbstractResource, AbstractRoute, UrlMappingMatchInfo
from yarl import URL

from mnemo.agent.tool_plugins import AgentTool

from .channels.base import Channel, ChannelHost
from .plugin_sources import Loaded, PluginError, Source, discover, folder_signature, unload_module

if TYPE_CHECKING:
    from aiohttp.web_urldispatcher import _InfoDict

log = logging.getLogger(__name__)

POLL_S = 2.0
"""How often the plugins folder is checked for changes."""
LOAD_TIMEOUT_S = 30.0
"""A plugin whose code takes longer to load is reported as failed (the gateway goes on)."""


class ToolRegistry(Protocol):
    """Where plugin tools go (:class:`mnemo.agent.tool_plugins.PluginTools`)."""

    @property
    def reserved(self) -> frozenset[str]:
        """The built-in tools' names."""
        ...

    def add(self, tool: AgentTool) -> None: ...
    def remove(self, name: str) -> bool: ...


class PluginRoutes(AbstractResource):
    """The HTTP routes of running plugin channels, each on its own application; checked last."""

    def __init__(self) -> None:
        super().__init__()
        self.apps: dict[str, web.Application] = {}

    @property
    def canonical(self) -> str:
        return "/"  # indexed under "/", which the router tries after every more specific path

    def url_for(self, **kwargs: str) -> URL:
        raise NotImplementedError("plugin routes have no URL of their own")

    def add_prefix(self, prefix: str) -> None:
        raise NotImplementedError("plugin routes cannot be mounted under a prefix")

    def get_info(self) -> _InfoDict:
        return {}

    def raw_match(self, path: str) -> bool:
        return False

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[AbstractRoute]:
        return iter(())

    async def resolve(self, request: web.Request) -> tuple[UrlMappingMatchInfo | None, set[str]]:
        allowed: set[str] = set()
        for app in list(self.apps.values()):
            match = await app.router.resolve(request)
            error = match.http_exception
            if error is None:
                match.add_app(app)
                return match, allowed
            if isinstance(error, web.HTTPMethodNotAllowed):
                allowed |= set(error.allowed_methods)
        return None, allowed


@dataclass
class SourceState:
    source: str
    kind: str
    state: str = "loaded"
    """``loaded``; ``failed`` (nothing of it registered); ``stale`` (the new version failed, the old runs)."""
    problem: str = ""
    channel_problems: dict[str, str] = field(default_factory=dict)

    def as_dict(self, loaded: Loaded | None) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "kind": self.kind, "state": self.state}
        out["tools"] = sorted(t.name for t in loaded.tools) if loaded else []
        out["channels"] = sorted(loaded.channels) if loaded else []
        problems = [self.problem] if self.problem else []
        problems += [f"channel {n}: {p}" for n, p in self.channel_problems.items()]
        return out | ({"problem": "; ".join(problems)} if problems else {})


class PluginManager:
    def __init__(
        self,
        folder: Path,
        host: ChannelHost,
        tools: ToolRegistry | None,
        channel_config: Mapping[str, dict[str, Any]],
        *,
        poll_s: float = POLL_S,
        entry_points: bool = True,
    ) -> None:
        self.folder, self.host, self.tools, self.channel_config = folder, host, tools, channel_config
        self.poll_s, self.entry_points = poll_s, entry_points
        self.routes = PluginRoutes()
        self.loaded: dict[str, Loaded] = {}
        self.states: dict[str, SourceState] = {}
        self.running: dict[str, Channel] = {}
        self._lock = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None
        self._loaded_once = False

    # -- life ---------------------------------------------------------------------------------------
    async def start(self) -> dict[str, Any]:
        """Load every source, start the enabled plugin channels, then watch the folder."""
        seen = await asyncio.to_thread(folder_signature, self.folder)  # before loading: no edit is missed
        report = await self.reload()
        self._watcher = asyncio.create_task(self._watch(seen))
        return report

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        async with self._lock:
            for name in list(self.running):
                await self._stop_channel(name)

    async def _watch(self, seen: tuple[tuple[str, str], ...]) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            now = await asyncio.to_thread(folder_signature, self.folder)
            if now != seen:
                seen = now
                try:
                    report = await self.reload()
                    log.info(
                        "plugins folder changed: %s", {k: report[k] for k in ("loaded", "unloaded", "failed")}
                    )
                except Exception:  # the next change retries; the gateway goes on
                    log.exception("plugin reload failed")

    # -- reload -------------------------------------------------------------------------------------
    async def reload(self) -> dict[str, Any]:
        """Bring the registrations in line with the sources; returns what changed and every state."""
        async with self._lock:
            sources = await asyncio.to_thread(discover, self.folder, entry_points=self.entry_points)
            loaded: list[str] = []
            unloaded: list[str] = []
            failed: list[dict[str, str]] = []
            for gone in [s for s in self.states if s not in sources]:
                if gone in self.loaded:
                    await self._unregister(self.loaded.pop(gone))
                    unloaded.append(gone)
                del self.states[gone]
            for source in sources.values():
                old = self.loaded.get(source.id)
                fresh = old is not None and old.fingerprint == source.fingerprint
                if fresh and self.states[source.id].state == "loaded":
                    continue  # unchanged; a failed or stale source is retried (a fix may be installed)
                problem = await self._replace(source, old)
                if problem:
                    failed.append({"source": source.id, "problem": problem})
                else:
                    loaded.append(source.id)
            await self._sync_channels()
            self._loaded_once = True
            return {"loaded": loaded, "unloaded": unloaded, "failed": failed, "plugins": self.states_list()}

    async def _replace(self, source: Source, old: Loaded | None) -> str:
        """Load ``source`` and swap it in for ``old``; '' on success, else the problem (old stays)."""
        state = self.states.setdefault(source.id, SourceState(source.id, source.kind))
        new: Loaded | None = None
        try:
            new = await asyncio.wait_for(asyncio.to_thread(source.load), LOAD_TIMEOUT_S)
            self._check_names(new, source.id)
        except (PluginError, TimeoutError) as exc:
            if new is not None:
                unload_module(new)
            problem = str(exc) or f"took longer than {LOAD_TIMEOUT_S:g} s to load"
            state.state, state.problem = ("stale" if old is not None else "failed"), problem
            log.warning("plugin %s: %s", source.id, problem)
            return problem
        if old is not None:
            await self._unregister(old)
        self._register(new)
        self.loaded[source.id] = new
        state.state, state.problem = "loaded", ""
        state.channel_problems.clear()
        return ""

    def _check_names(self, new: Loaded, source: str) -> None:
        for other in self.loaded.values():
            if other.source == source:
                continue
            taken = {t.name for t in other.tools} & {t.name for t in new.tools}
            taken |= set(other.channels) & set(new.channels)
            if taken:
                raise PluginError(f"{', '.join(sorted(taken))} already provided by {other.source}")
        if new.tools and self.tools is None:
            raise PluginError("this gateway's agent takes no plugin tools")
        builtin = {t.name for t in new.tools} & (self.tools.reserved if self.tools else frozenset())
        if builtin:
            raise PluginError(f"tool name {', '.join(map(repr, sorted(builtin)))} is a built-in tool's")

    def _register(self, new: Loaded) -> None:
        for tool in new.tools:  # names checked (_check_names): nothing here can clash
            assert self.tools is not None
            self.tools.add(tool)

    async def _unregister(self, old: Loaded) -> None:
        for tool in old.tools:
            if self.tools is not None:
                self.tools.remove(tool.name)
        for name in old.channels:
            if name in self.running:
                await self._stop_channel(name)
        unload_module(old)

    # -- channels -----------------------------------------------------------------------------------
    def _provided(self) -> dict[str, tuple[str, type[Channel]]]:
        return {n: (src, cls) for src, ld in self.loaded.items() for n, cls in ld.channels.items()}

    async def _sync_channels(self) -> None:
        """Start the enabled channels that a plugin provides and are not running (or whose class changed)."""
        provided = self._provided()
        for name in list(self.running):
            if name not in provided or type(self.running[name]) is not provided[name][1]:
                await self._stop_channel(name)
        for name, (source, cls) in provided.items():
            config = self.channel_config.get(name)
            if name in self.running or config is None or not config.get("enabled", True):
                continue
            state = self.states[source]
            try:
                channel = cls(self.host, config)
                app = web.Application()
                channel.mount(app)
                app.freeze()  # its routes are set; aiohttp reads its (empty) middleware chain
                await channel.start()
            except Exception as exc:  # a plugin's channel: reported, the gateway goes on
                log.warning("plugin channel %s did not start: %s", name, exc)
                state.channel_problems[name] = f"did not start: {type(exc).__name__}: {exc}"
                continue
            state.channel_problems.pop(name, None)
            self.running[name] = channel
            self.routes.apps[name] = app

    async def _stop_channel(self, name: str) -> None:
        channel = self.running.pop(name)
        self.routes.apps.pop(name, None)
        try:
            await channel.stop()
        except Exception:
            log.exception("plugin channel %s did not stop cleanly", name)

    # -- what the gateway shows ----------------------------------------------------------------------
    def states_list(self) -> list[dict[str, Any]]:
        return [state.as_dict(self.loaded.get(src)) for src, state in sorted(self.states.items())]

    def channel_states(self, built_in: set[str]) -> list[dict[str, Any]]:
        """Plugin channels as ``channels.list`` shows them; ``built_in``: names the gateway runs itself."""
        provided = self._provided()
        out: list[dict[str, Any]] = []
        for name, channel in self.running.items():
            try:
                described = channel.describe()
            except Exception as exc:
                described = {"problem": f"describe() failed: {exc}"}
            out.append({"name": name, **described, "state": "on", "plugin": provided[name][0]})
        for name, config in self.channel_config.items():
            if name in built_in or name in self.running or not config.get("enabled", True):
                continue
            if name in provided:
                source = provided[name][0]
                why = self.states[source].channel_problems.get(name, "not started")
                out.append({"name": name, "state": "off", "plugin": source, "problem": why})
            else:
                why = f"no plugin provides channel {name!r}" if self._loaded_once else "plugins load at start"
                out.append({"name": name, "state": "off", "problem": why})
        return out

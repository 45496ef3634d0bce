"""Where gateway plugins come from, and loading one source checked against the interfaces.

Sources: each ``plugins/*.py`` file of the workspace (a module defining ``TOOLS`` and/or ``CHANNELS``),
each entry point of the ``mnemo.tools`` group (an :class:`~mnemo.agent.tool_plugins.AgentTool` class or
instance) and each entry point of the ``mnemo.channels`` group (a
:class:`~mnemo.gateway.channels.base.Channel` subclass, named by the entry point). A source has a
fingerprint (a file's content hash, an entry point's target and version): an unchanged source is not
loaded again. Loading runs the plugin's code and raises :class:`PluginError` with the reason when anything
does not fit: the whole source is then refused, none of it half-registered.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import itertools
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mnemo.agent.tool_plugins import AgentTool, validate_tool
from mnemo.errors import MnemoError

from .channels.base import BUILT_IN, ENTRY_POINT_GROUP, Channel

TOOLS_GROUP = "mnemo.tools"
CHANNEL_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{1,39}")
MODULE_PREFIX = "mnemo_plugins."
_serial = itertools.count(1)


class PluginError(MnemoError):
    """A plugin source that cannot be loaded: its code raised, or what it provides does not fit."""


@dataclass
class Loaded:
    """What one source provides, checked."""

    source: str
    fingerprint: str
    tools: list[AgentTool] = field(default_factory=list)
    channels: dict[str, type[Channel]] = field(default_factory=dict)
    module: str = ""
    """The ``sys.modules`` name of a file plugin (dropped when it is unloaded)."""


@dataclass(frozen=True)
class Source:
    id: str
    """``plugins/weather.py`` or ``entry point mnemo.tools:weather``."""
    kind: Literal["file", "entry-point"]
    fingerprint: str
    load: Callable[[], Loaded]


def validate_channel(obj: object, name: str) -> type[Channel]:
    """``obj`` as a channel class named ``name``; PluginError saying what is wrong."""
    if not isinstance(obj, type) or not issubclass(obj, Channel):
        raise PluginError(
            f"channel {name!r}: {obj!r} is not a subclass of mnemo.gateway.channels.base.Channel"
        )
    if inspect.isabstract(obj):
        raise PluginError(
            f"channel {name!r}: {obj.__name__} does not implement {sorted(obj.__abstractmethods__)}"
        )
    if not CHANNEL_NAME_RE.fullmatch(name):
        raise PluginError(f"channel name {name!r} must be 2-40 characters of a-z, 0-9, _ and -")
    if name in BUILT_IN:
        raise PluginError(f"channel name {name!r} is a built-in channel's")
    return obj


def _run_file(path: Path, data: bytes) -> types.ModuleType:
    """Execute a plugin file as a fresh module (compiled here: no stale bytecode after a quick edit)."""
    stem = re.sub(r"\W", "_", path.stem)
    name = f"{MODULE_PREFIX}{stem}_{next(_serial)}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses and pickling look their module up there
    try:
        exec(compile(data, str(path), "exec"), module.__dict__)
    except (Exception, SystemExit) as exc:  # SystemExit too: a plugin must never stop the gateway
        sys.modules.pop(name, None)
        raise PluginError(f"{type(exc).__name__}: {exc}") from exc
    return module


def _load_file(path: Path, source: str, data: bytes, fingerprint: str) -> Loaded:
    module = _run_file(path, data)
    try:
        tools, channels = getattr(module, "TOOLS", None), getattr(module, "CHANNELS", None)
        if tools is None and channels is None:
            raise PluginError("defines neither TOOLS (agent tools) nor CHANNELS (channel classes)")
        if not isinstance(tools or [], list | tuple) or not isinstance(channels or [], list | tuple):
            raise PluginError("TOOLS and CHANNELS must be lists")
        loaded = Loaded(source, fingerprint, module=module.__name__)
        for item in tools or []:
            try:
                loaded.tools.append(validate_tool(item, ()))
            except ValueError as exc:
                raise PluginError(str(exc)) from exc
        for cls in channels or []:
            name = getattr(cls, "name", "")
            loaded.channels[str(name)] = validate_channel(cls, str(name))
    except PluginError:
        sys.modules.pop(module.__name__, None)
        raise
    return loaded


def unload_module(loaded: Loaded) -> None:
    if loaded.module:
        sys.modules.pop(loaded.module, None)


def _file_sources(folder: Path) -> dict[str, Source]:
    found: dict[str, Source] = {}
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        if path.name.startswith((".", "_")) or not path.is_file():
            continue
        source = f"{folder.name}/{path.name}"
        try:
            data = path.read_bytes()
        except OSError as exc:
            found[source] = Source(source, "file", f"unreadable: {exc}", _refuse(f"cannot read it: {exc}"))
            continue
        digest = hashlib.sha256(data).hexdigest()
        found[source] = Source(
            source,
            "file",
            digest,
            lambda p=path, s=source, d=data, f=digest: _load_file(p, s, d, f),  # type: ignore[misc]
        )
    return found


def _refuse(why: str) -> Callable[[], Loaded]:
    def load() -> Loaded:
        raise PluginError(why)

    return load


def _entry_sources() -> dict[str, Source]:
    found: dict[str, Source] = {}
    for group in (TOOLS_GROUP, ENTRY_POINT_GROUP):
        for ep in importlib.metadata.entry_points(group=group):
            source = f"entry point {group}:{ep.name}"
            version = ep.dist.version if ep.dist is not None else "?"
            fingerprint = f"{ep.value}@{version}"
            found[source] = Source(
                source,
                "entry-point",
                fingerprint,
                lambda e=ep, s=source, f=fingerprint: _load_entry(e, s, f),  # type: ignore[misc]
            )
    return found


def _load_entry(ep: importlib.metadata.EntryPoint, source: str, fingerprint: str) -> Loaded:
    try:
        obj = ep.load()
    except (Exception, SystemExit) as exc:
        raise PluginError(f"{ep.value} cannot be loaded: {type(exc).__name__}: {exc}") from exc
    loaded = Loaded(source, fingerprint)
    if ep.group == TOOLS_GROUP:
        try:
            loaded.tools.append(validate_tool(obj, ()))
        except ValueError as exc:
            raise PluginError(str(exc)) from exc
    else:
        loaded.channels[ep.name] = validate_channel(obj, ep.name)
    return loaded


def discover(folder: Path, *, entry_points: bool = True) -> dict[str, Source]:
    """Every source there is now: the folder's files, then the installed entry points."""
    return {**_file_sources(folder), **(_entry_sources() if entry_points else {})}


def folder_signature(folder: Path) -> tuple[tuple[str, str], ...]:
    """What the watcher compares: each plugin file's name and content hash (a quick edit that keeps the
    size and the modification time's tick is still seen)."""
    if not folder.is_dir():
        return ()
    out: list[tuple[str, str]] = []
    for path in sorted(folder.glob("*.py")):
        try:
            out.append((path.name, hashlib.sha256(path.read_bytes()).hexdigest()))
        except OSError:
            continue
    return tuple(out)

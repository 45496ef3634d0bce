"""Agent tools added at run time by plugins: their interface, validation, and the registry the ToolBox holds.

A plugin tool is a subclass (or an instance of one) of :class:`AgentTool`, found in the ``mnemo.tools``
entry point group or in a ``plugins/*.py`` file of the workspace (``TOOLS = [...]``; loaded by
:mod:`mnemo.gateway.plugins`). It never runs on its own authority: every call goes through the same
``ToolGate`` as ``exec`` (the policy decides on its name — ``[policy.tools] weather = "allow"`` or a rule
with ``tool = "weather"``; the default asks — then approvals, the risk monitor, the audit log), and what
it does to the machine goes through :class:`ToolContext`, whose ``exec`` and ``write_file`` are gated
calls of their own (the command runs in the sandbox). Plugin code runs in mnemo's process: install only
plugins you trust, as you would any Python package.
"""

from __future__ import annotations

import logging
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

NAME_RE = re.compile(r"[a-z][a-z0-9_]{1,39}")
SPEC_MAX_CHARS = 400


class Outcome(Protocol):
    @property
    def ok(self) -> bool: ...
    @property
    def output(self) -> str: ...
    @property
    def decision(self) -> str: ...


class Gate(Protocol):
    def call(self, session: str, tool: str, args: dict[str, Any]) -> Outcome: ...


@dataclass(frozen=True)
class ToolContext:
    """What a plugin tool may use. Its side effects go through the gate like the model's own calls."""

    session_id: str
    root: Path
    private: bool
    """False in a group session: the tool must not return MEMORY.md or other private memory."""
    gate: Gate

    def exec(self, command: str) -> Outcome:
        """Run ``command`` in the sandbox: policy, approvals and audit as for the model's ``exec``."""
        return self.gate.call(self.session_id, "exec", {"command": command})

    def write_file(self, path: str, content: str) -> Outcome:
        """Write a workspace file: policy, approvals and audit as for the model's ``write_file``."""
        return self.gate.call(self.session_id, "write_file", {"path": path, "content": content})


class AgentTool(ABC):
    """The plugin tool interface."""

    name: str = ""
    """How the model calls it: lower case, digits and ``_``, 2-40 characters, not a built-in tool's name."""
    spec: str = ""
    """Its arguments and purpose as the model reads them: ``{"city": "Paris"}: the weather in a city``."""

    @abstractmethod
    def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        """The observation the model sees. An exception becomes a failed call (the turn goes on)."""


def validate_tool(obj: object, reserved: Collection[str] = ()) -> AgentTool:
    """``obj`` (an :class:`AgentTool` subclass, instantiated without arguments, or an instance) checked
    against the interface; ValueError saying what is wrong."""
    if isinstance(obj, type):
        cls = obj
        if not issubclass(cls, AgentTool):
            raise ValueError(f"{cls.__name__} is not a subclass of mnemo.agent.tool_plugins.AgentTool")
        try:
            obj = cls()
        except Exception as exc:
            raise ValueError(f"{cls.__name__}() failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(obj, AgentTool):
        raise ValueError(f"{obj!r} is not an AgentTool")
    name, spec = obj.name, obj.spec
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ValueError(
            f"tool name {name!r} must be 2-40 characters of a-z, 0-9 and _, starting with a letter"
        )
    if name in reserved:
        raise ValueError(f"tool name {name!r} is a built-in tool's")
    if not isinstance(spec, str) or not spec.strip() or len(spec) > SPEC_MAX_CHARS:
        raise ValueError(f"tool {name!r} needs a spec string of 1-{SPEC_MAX_CHARS} characters")
    return obj


def plugin_runner(tool: AgentTool, args: dict[str, Any], ctx: ToolContext) -> Callable[[], tuple[str, bool]]:
    """What the gate runs once it allows the call: the tool, any exception turned into a failed result."""

    def run() -> tuple[str, bool]:
        try:
            return str(tool.run(args, ctx)), True
        except Exception as exc:  # plugin code: its failure is the model's observation, not the turn's end
            log.warning("plugin tool %s failed: %s", tool.name, exc, exc_info=True)
            return f"{tool.name} failed: {type(exc).__name__}: {exc}", False

    return run


class PluginTools:
    """The plugin tools of one ToolBox; thread-safe (a reload runs while turns call tools)."""

    def __init__(self, reserved: Collection[str]) -> None:
        self.reserved = frozenset(reserved)
        self._tools: dict[str, AgentTool] = {}
        self._lock = threading.Lock()
        self.listeners: list[Callable[[], None]] = []
        """Called after each change (the agent refreshes the tool list its context shows)."""

    def add(self, tool: AgentTool) -> None:
        tool = validate_tool(tool, self.reserved)
        with self._lock:
            if tool.name in self._tools:
                raise ValueError(f"a tool named {tool.name!r} is already registered")
            self._tools[tool.name] = tool
        self._changed()

    def remove(self, name: str) -> bool:
        with self._lock:
            gone = self._tools.pop(name, None) is not None
        if gone:
            self._changed()
        return gone

    def get(self, name: str) -> AgentTool | None:
        with self._lock:
            return self._tools.get(name)

    def names(self) -> set[str]:
        with self._lock:
            return set(self._tools)

    def describe(self) -> list[str]:
        with self._lock:
            return [f"- {t.name} {t.spec}" for t in self._tools.values()]

    def _changed(self) -> None:
        for listener in list(self.listeners):
            try:
                listener()
            except Exception:  # a listener's bug must not undo the registration
                log.exception("plugin tool listener failed")

"""Tolerant tool-call parsing: small models wrap a call in many ways.

Accepted: ``<tool_call>{...}</tool_call>`` (closing tag optional), a fenced block (json, tool_call or no
language), or a bare JSON object anywhere in the text, with prose before or after it. The object names
the tool with ``name``/``tool``/``function`` and its arguments with ``arguments``/``args``/
``parameters``/``input`` (an object or a JSON string); OpenAI's ``{"function": {"name", "arguments"}}``
shape is accepted too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_TAG_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE_RE = re.compile(r"```[ \t]*(?:json|tool_call|tool)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_THINK_RE = re.compile(r"<think(?:ing)?>(.*?)</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
STREAM_MARKERS = ("<tool_call>", "```", "{")
"""Text from which a reply may turn out to be a tool call: held back from the client until decided."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    prose: str = ""
    """Text outside the call (said before or after it)."""


def _objects(text: str) -> list[tuple[int, int, Any]]:
    """Every top-level JSON object in the text as (start, end, value)."""
    decoder = json.JSONDecoder()
    found: list[tuple[int, int, Any]] = []
    i = text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        found.append((i, end, value))
        i = text.find("{", end)
    return found


def _as_call(value: Any, known: set[str]) -> tuple[str, dict[str, Any]] | None:
    if not isinstance(value, dict):
        return None
    fn = value.get("function")
    if isinstance(fn, dict):
        value = {**value, **fn}
    name = value.get("name", value.get("tool", fn if isinstance(fn, str) else None))
    if not isinstance(name, str) or name not in known:
        return None
    args: Any = next(
        (value[k] for k in ("arguments", "args", "parameters", "input") if k in value),
        {k: v for k, v in value.items() if k not in ("name", "tool", "function", "type", "id")},
    )
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return name, args


def parse_tool_call(text: str, known: set[str]) -> ToolCall | None:
    """The first call of a known tool in a reply, or None when the reply is a plain answer."""
    spans: list[tuple[int, int, str]] = []
    for match in _TAG_RE.finditer(text):
        spans.append((match.start(), match.end(), match.group(1)))
    for match in _FENCE_RE.finditer(text):
        spans.append((match.start(), match.end(), match.group(1)))
    spans.append((0, len(text), text))
    for start, end, body in spans:
        for obj_start, obj_end, value in _objects(body):
            call = _as_call(value, known)
            if call is None:
                continue
            if (start, end) == (0, len(text)):
                start, end = obj_start, obj_end
            prose = (text[:start] + " " + text[end:]).strip()
            return ToolCall(call[0], call[1], prose)
    return None


def split_thoughts(text: str) -> tuple[list[str], str]:
    """(thoughts in <think> blocks, the rest of the reply)."""
    thoughts = [t.strip() for t in _THINK_RE.findall(text) if t.strip()]
    return thoughts, _THINK_RE.sub("", text).strip()


class DeltaGate:
    """Streams a reply's deltas to the client but holds back anything that may be a tool call or thought.

    Text before a possible marker (``<tool_call>``, a fence, ``{``, ``<think>``) goes out at once; from the
    marker on it is held until the reply ends, then released only if the reply was not a tool call.
    """

    MARKERS = (*STREAM_MARKERS, "<think")

    def __init__(self, emit: Any) -> None:
        self._emit = emit
        self._text = ""
        self._sent = 0
        self._holding = False

    def feed(self, delta: str) -> None:
        self._text += delta
        if self._holding:
            return
        pending = self._text[self._sent :]
        cut = len(pending)
        for marker in self.MARKERS:
            at = pending.find(marker)
            if at >= 0:
                cut = min(cut, at)
                self._holding = True
        if not self._holding:  # keep a tail that could be the start of a marker
            for marker in self.MARKERS:
                for k in range(min(len(marker) - 1, len(pending)), 0, -1):
                    if pending.endswith(marker[:k]):
                        cut = min(cut, len(pending) - k)
                        break
        if cut > 0:
            self._emit(pending[:cut])
            self._sent += cut

    def finish(self, release: str | None) -> None:
        """End of reply: ``release`` is the visible remainder to send (None: send nothing more)."""
        if release is None:
            return
        sent = self._text[: self._sent]
        if release.startswith(sent):
            rest = release[len(sent) :]
        elif release.startswith(sent.strip()):
            rest = release[len(sent.strip()) :]
        else:
            rest = ""  # cannot be reconciled; the final message is the source of truth
        if rest:
            self._emit(rest)

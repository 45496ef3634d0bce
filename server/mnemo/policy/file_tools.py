"""The file tools the gate runs in-process: ``write_file`` (inside the workspace only, atomically) and
``read_file`` (bounded). Commands run in the sandbox instead (:mod:`mnemo.policy.sandbox`)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from mnemo.atomic_file import replace_text
from mnemo.policy.shell import is_inside, resolve_path


class ToolError(RuntimeError):
    """A tool could not do what was asked (bad arguments, file problems); the message is for the agent."""


def tool_target(workspace: Path, args: dict[str, Any], *, must_be_inside: bool) -> Path:
    """The path a file tool names, resolved against the workspace; no globs or variables."""
    raw = args.get("path")
    if not isinstance(raw, str) or not raw:
        raise ToolError("a 'path' string is required")
    if re.search(r"[*?\[{$]", raw):
        raise ToolError(f"{raw}: paths may not hold glob characters or $variables")
    target = resolve_path(raw, workspace)
    if must_be_inside and (not is_inside(target, workspace) or target == workspace):
        raise ToolError(f"{raw} is outside the workspace")
    return target


def write_file(workspace: Path, args: dict[str, Any]) -> str:
    """Write ``content`` to ``path`` inside the workspace, whole or not at all
    (:func:`mnemo.atomic_file.replace_text`)."""
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("a 'content' string is required")
    target = tool_target(workspace, args, must_be_inside=True)
    if target.is_dir():
        raise ToolError(f"{args['path']} is a folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_text(target, content)
    rel = os.path.relpath(target, workspace)
    return f"wrote {len(content.encode('utf-8'))} bytes to {rel}"


def read_file(workspace: Path, args: dict[str, Any], max_bytes: int) -> str:
    """The first ``max_bytes`` of ``path`` as text (a note when cut)."""
    target = tool_target(workspace, args, must_be_inside=False)
    with target.open("rb") as fh:
        data = fh.read(max_bytes + 1)
    text = data[:max_bytes].decode("utf-8", errors="replace")
    return text + ("\n[truncated]" if len(data) > max_bytes else "")

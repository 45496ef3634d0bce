"""Where a command writes: protected workspace files, and redirections checked like commands.

Inside the workspace two kinds of files are protected:

* **control** files, which decide what mnemo trusts or runs: ``mnemo.toml``, ``.mnemo/`` (the index and the
  audit log) and any ``.git`` (a folder, or the ``.git`` file that points elsewhere). Any write → deny.
* **memory** files: ``MEMORY.md``, ``SOUL.md``, ``AGENTS.md``, ``TOOLS.md``, ``USER.md``, ``memory/**/*.md``,
  ``skills/*/SKILL.md`` (and the ``memory``/``skills`` folders). Deleting one, or truncating an existing
  one (``>``), → deny; appending (``>>``), editing in place or creating a new one → confirm.

Every redirection target is such a path: outside the workspace → deny (``/dev/null``, the standard streams
and the sandbox's private ``/tmp`` excepted); a target that still holds ``$`` after the known variables of
the line are substituted → confirm; reading (``<``) from outside the workspace → confirm, like read_file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from mnemo.policy.sandbox import HOST_RUN_DIRS
from mnemo.policy.shell import OUTPUT_REDIRECTS, Segment, is_inside, is_safe_target, resolve_path
from mnemo.policy.verdict import Context, Decision, confirm, deny
from mnemo.workspace.layout import MEMORY_FILES

Mode = Literal["create", "append", "modify", "truncate", "delete"]
MEMORY_ROOT_FILES = frozenset({*MEMORY_FILES, "SOUL.md", "AGENTS.md", "TOOLS.md", "USER.md"})
PERSIST_RE = re.compile(
    r"(^|/)(\.(bash|zsh)rc|\.bash_profile|\.bash_login|\.profile|\.zprofile|\.config/autostart"
    r"|\.config/systemd|crontab|cron\.d|cron\.(daily|hourly))(/|$)"
)
DEVICES = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero")
APPEND_OPS = frozenset({">>", "&>>"})


def classify(path: Path, ws: Path) -> str | None:
    """``control``, ``memory``, ``workspace`` (the root itself) or None for any other path."""
    if not is_inside(path, ws):
        return None
    rel = os.path.relpath(path, ws)
    if rel == ".":
        return "workspace"
    parts = rel.split(os.sep)
    if rel == "mnemo.toml" or parts[0] in (".mnemo", "plugins") or ".git" in parts:  # plugins: gateway code
        return "control"
    if parts[0] in HOST_RUN_DIRS:  # an editor or tool runs what is in them, on the host
        return "control"
    if rel in MEMORY_ROOT_FILES:
        return "memory"
    if parts[0] == "memory" and (len(parts) == 1 or rel.endswith(".md") or path.is_dir()):
        return "memory"
    if parts[0] == "skills" and (len(parts) <= 2 or (len(parts) == 3 and parts[2] == "SKILL.md")):
        return "memory"
    return None


def write_decision(raw: str, path: Path, mode: Mode, ws: Path) -> Decision | None:
    """The built-in verdict for writing ``path`` (``raw`` as written) in ``mode``; None when unprotected."""
    kind = classify(path, ws)
    if kind == "control":
        return deny(
            "protected", f"{raw} is mnemo's settings, index, audit log, plugins, Git data or editor settings"
        )
    if kind == "memory" and mode != "create":
        if mode == "delete" or (mode == "truncate" and path.exists()):
            return deny("memory-overwrite", f"{raw} is a memory file: it would be deleted or emptied")
        return confirm("memory-write", f"{raw} is a memory file: writing it needs approval")
    if is_inside(path, ws) and PERSIST_RE.search(os.path.relpath(path, ws)):
        return deny("persistence", f"{raw} is a shell start-up or cron file")
    return None


def check_write(raw: str, mode: Mode, ctx: Context) -> list[Decision]:
    """Checks for a path a command writes (outside, protected, variable)."""
    if "$" in raw or "`" in raw:
        return [confirm("variable-target", f"{raw} is built from a variable: cannot check where it writes")]
    if raw in DEVICES or raw.startswith("/dev/fd/"):
        return []
    if not is_safe_target(raw, ctx.ws, ctx.base):
        return [deny("outside-workspace", f"{raw} is outside the workspace")]
    found = write_decision(raw, resolve_path(raw, ctx.base), mode, ctx.ws)
    return [found] if found else []


def check_redirects(seg: Segment, ctx: Context) -> list[Decision]:
    """Every redirection of ``seg`` checked like a command that writes (or reads) its target."""
    hits: list[Decision] = []
    for red in seg.redirects:
        target = red.target
        if red.op in ("<<", "<<<") or (red.op in (">&", "<&") and (target.isdigit() or target == "-")):
            continue
        if red.op in OUTPUT_REDIRECTS:
            mode: Mode = "append" if red.op in APPEND_OPS else "modify" if red.op == "<>" else "truncate"
            hits.extend(check_write(target, mode, ctx))
        elif "$" in target or "`" in target:
            hits.append(confirm("variable-target", f"input {target} is built from a variable"))
        elif not is_safe_target(target, ctx.ws, ctx.base) and target not in DEVICES:
            hits.append(confirm("read-outside", f"reads {target}, outside the workspace"))
    return hits

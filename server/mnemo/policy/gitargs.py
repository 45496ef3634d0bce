"""Argument rules for ``git``: allowlisting git never allows running code through it.

Git runs commands named in its configuration (aliases starting with ``!``, ``core.fsmonitor``,
``core.hooksPath``, pagers, filters, diff drivers, credential helpers, ``core.sshCommand`` ...) and a few
options name a program (``--upload-pack``, ``--receive-pack``, ``--exec``, ``--exec-path``, ``rebase
--exec``, ``bisect run``, ``submodule foreach``). Setting such a key (``git config``, ``git -c``,
``--config-env``, ``clone --config``) is denied; options that run a program are denied, or checked as
commands and confirmed; a subcommand git does not ship (an alias, or an external ``git-<name>``) is
confirmed.
"""

from __future__ import annotations

import re
import shlex

from mnemo.policy.shell import Segment, is_inside, resolve_path
from mnemo.policy.targets import check_write
from mnemo.policy.verdict import Context, Decision, Verdict, confirm, deny

EXEC_KEY = re.compile(
    r"^(alias\..+|include\.path|includeif\..+|filter\..+|pager\..+|mergetool\..+|difftool\..+"
    r"|core\.(fsmonitor|hookspath|pager|sshcommand|editor|askpass|gitproxy|worktree|alternaterefscommand)"
    r"|diff\.external|diff\..+\.(textconv|command)|merge\..+\.driver|credential(\..+)?\.helper"
    r"|sequence\.editor|gpg(\..+)?\.program|uploadpack\..+|receivepack\..+|receive\.procreceiverefs"
    r"|remote\..+\.(uploadpack|receivepack|proxy|vcs)|protocol(\..+)?\.allow|submodule\..+\.update"
    r"|browser\..+|web\.browser|instaweb\..+|man\..+|help\.browser|sendemail\..+|interactive\.difffilter"
    r"|trailer\..+\.(command|cmd)|safe\.directory|core\.fsmonitorhookversion)$",
    re.IGNORECASE,
)
SUBCOMMANDS = frozenset(
    [
        "add",
        "annotate",
        "apply",
        "archive",
        "bisect",
        "blame",
        "branch",
        "bundle",
        "cat-file",
        "check-attr",
        "check-ignore",
        "check-mailmap",
        "check-ref-format",
        "checkout",
        "cherry",
        "cherry-pick",
        "clean",
        "clone",
        "column",
        "commit",
        "commit-graph",
        "commit-tree",
        "config",
        "count-objects",
        "describe",
        "diff",
        "diff-files",
        "diff-index",
        "diff-tree",
        "fetch",
        "for-each-ref",
        "format-patch",
        "fsck",
        "gc",
        "grep",
        "hash-object",
        "help",
        "init",
        "log",
        "ls-files",
        "ls-remote",
        "ls-tree",
        "merge",
        "merge-base",
        "merge-file",
        "mktag",
        "mktree",
        "mv",
        "name-rev",
        "notes",
        "prune",
        "pull",
        "push",
        "range-diff",
        "read-tree",
        "rebase",
        "reflog",
        "remote",
        "repack",
        "replace",
        "rerere",
        "reset",
        "restore",
        "rev-list",
        "rev-parse",
        "revert",
        "rm",
        "shortlog",
        "show",
        "show-branch",
        "show-ref",
        "sparse-checkout",
        "stash",
        "status",
        "submodule",
        "switch",
        "symbolic-ref",
        "tag",
        "update-index",
        "update-ref",
        "var",
        "verify-commit",
        "verify-pack",
        "verify-tag",
        "version",
        "whatchanged",
        "worktree",
        "write-tree",
        "am",
        "apply",
        "blame",
    ]
)
CONFIRM_SUBCOMMANDS = frozenset(
    [
        "difftool",
        "mergetool",
        "filter-branch",
        "daemon",
        "instaweb",
        "send-email",
        "credential",
        "upload-pack",
        "receive-pack",
        "http-backend",
        "shell",
        "web--browse",
        "hook",
        "maintenance",
        "imap-send",
        "request-pull",
        "p4",
        "svn",
        "cvsimport",
    ]
)
GLOBAL_WITH_VALUE = frozenset({"-c", "-C", "--git-dir", "--work-tree", "--namespace", "--config-env"})
CONFIG_VERBS = frozenset({"list", "get", "set", "unset", "rename-section", "remove-section", "edit"})
READ_FLAGS = frozenset(
    {"get", "get-all", "get-regexp", "get-urlmatch", "get-color", "get-colorbool", "l", "list"}
)
UNSET_FLAGS = frozenset({"unset", "unset-all", "remove-section"})
SET_FLAGS = frozenset({"set", "add", "replace-all"})
EXEC_SECTIONS = frozenset(
    [
        "alias",
        "core",
        "include",
        "includeif",
        "filter",
        "pager",
        "diff",
        "merge",
        "mergetool",
        "difftool",
        "credential",
        "sequence",
        "gpg",
        "uploadpack",
        "receivepack",
        "receive",
        "remote",
        "protocol",
        "submodule",
        "browser",
        "web",
        "man",
        "help",
        "sendemail",
        "interactive",
        "trailer",
        "safe",
        "instaweb",
    ]
)
CONFIG_VALUE_OPTS = frozenset({"--type", "--default", "--comment", "--blob", "--value", "-t"})


def _key_hits(key: str, how: str) -> list[Decision]:
    if "$" in key or "`" in key:
        return [confirm("git-config", f"{how}: the key {key!r} is built from a variable")]
    if EXEC_KEY.match(key):
        return [deny("git-exec", f"{how} sets {key}, which makes git run a command")]
    return []


def check_git(seg: Segment, ctx: Context) -> list[Decision]:
    """The built-in verdicts for one ``git`` segment."""
    args = seg.argv[1:]
    hits: list[Decision] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        opt, value = args[i], ""
        if "=" in opt and opt.startswith("--"):
            opt, value = opt.split("=", 1)
        elif opt in GLOBAL_WITH_VALUE and i + 1 < len(args):
            i += 1
            value = args[i]
        elif opt.startswith("-c") and len(opt) > 2:
            opt, value = "-c", opt[2:]
        if opt == "-c":
            hits.extend(_key_hits(value.split("=", 1)[0], "git -c"))
        elif opt == "--config-env":
            hits.extend(_key_hits(value.split("=", 1)[0], "git --config-env"))
        elif opt == "--exec-path" and value:
            hits.append(deny("git-exec", "git --exec-path=DIR runs git commands from another folder"))
        elif opt in ("--git-dir", "--work-tree", "-C") and value:
            hits.extend(_elsewhere(opt, value, ctx))
        i += 1
    if i >= len(args):
        return hits
    sub, rest = args[i], args[i + 1 :]
    if sub == "config":
        hits.extend(_config(rest, ctx))
    elif sub == "push":
        hits.extend(_push(rest))
    elif sub == "clean" and not {"-n", "--dry-run"} & set(rest):
        hits.append(confirm("git-clean", "git clean deletes untracked files, new memory notes among them"))
    elif sub == "archive":
        for j, a in enumerate(rest):  # -o FILE, -oFILE, --output=FILE, --output FILE
            target = rest[j + 1] if a in ("-o", "--output") and j + 1 < len(rest) else ""
            target = a[2:] if a.startswith("-o") and len(a) > 2 else target
            target = a.split("=", 1)[1] if a.startswith("--output=") else target
            if target:
                hits.extend(check_write(target, "truncate", ctx))
    elif sub not in SUBCOMMANDS | CONFIRM_SUBCOMMANDS:
        hits.append(confirm("git-alias", f"git {sub} is not a git command: an alias or external git-{sub}"))
    elif sub in CONFIRM_SUBCOMMANDS:
        hits.append(confirm("git-exec", f"git {sub} runs other programs"))
    hits.extend(_program_options(sub, rest, ctx))
    return hits


def _elsewhere(opt: str, value: str, ctx: Context) -> list[Decision]:
    if "$" in value or not is_inside(resolve_path(value, ctx.base), ctx.ws):
        return [confirm("git-elsewhere", f"git {opt} {value}: a repository outside the workspace")]
    if opt != "-C":
        return [confirm("git-elsewhere", f"git {opt} {value}: that repository's settings may run commands")]
    return []


def _program_options(sub: str, rest: list[str], ctx: Context) -> list[Decision]:
    """Options of subcommands that name a program to run."""
    hits: list[Decision] = []
    for j, a in enumerate(rest):
        name, _, value = a.partition("=")
        if (
            name in ("--upload-pack", "--receive-pack")
            or (name == "--exec" and sub != "rebase")
            or (a == "-u" and sub == "clone")
        ):
            hits.append(deny("git-exec", f"git {sub} {name} runs a program of your choosing"))
        elif sub == "clone" and name in ("-c", "--config"):
            hits.extend(
                _key_hits((value or (rest[j + 1] if j + 1 < len(rest) else "")).split("=")[0], "clone -c")
            )
        elif name == "--template" or (
            sub == "grep" and (a.startswith("-O") or name == "--open-files-in-pager")
        ):
            hits.append(confirm("git-exec", f"git {sub} {name} may run commands"))
        elif sub == "rebase" and (name in ("-x", "--exec") or a in ("-i", "--interactive")):
            hits.append(confirm("git-exec", f"git rebase {name} runs commands"))
            code = value or (rest[j + 1] if j + 1 < len(rest) and name in ("-x", "--exec") else "")
            if code:
                hits.append(ctx.recurse(code))
    inner = ""
    if sub == "submodule" and "foreach" in rest:
        inner = " ".join(w for w in rest[rest.index("foreach") + 1 :] if w not in ("--recursive", "-q"))
    elif sub == "bisect" and rest[:1] == ["run"]:
        inner = shlex.join(rest[1:])
    if inner:
        hits += [confirm("git-exec", f"git {sub} runs a command"), ctx.recurse(inner)]
    return hits


def _config(rest: list[str], ctx: Context) -> list[Decision]:
    """``git config``: reading is free; writing an executable key, or outside the workspace, is not."""
    positional: list[str] = []
    flags: set[str] = set()
    file_target = ""
    j = 0
    while j < len(rest):
        a = rest[j]
        name, has_value, value = a.partition("=")
        if name in ("--file", "-f"):
            file_target = value if has_value else (rest[j + 1] if j + 1 < len(rest) else "")
            j += 0 if has_value else 1
        elif a in CONFIG_VALUE_OPTS and j + 1 < len(rest):
            j += 1
        elif a.startswith("-") or (j == 0 and a in CONFIG_VERBS):
            flags.add(name.lstrip("-"))
        else:
            positional.append(a)
        j += 1
    if flags & {"e", "edit"}:
        return [confirm("git-config", "git config --edit opens an editor on the settings")]
    renaming = bool(flags & {"rename-section"})
    setting = not (flags & READ_FLAGS or flags & UNSET_FLAGS) and (len(positional) >= 2 or flags & SET_FLAGS)
    if not setting and not renaming:
        return []
    hits: list[Decision] = []
    if flags & {"global", "system"}:
        hits.append(deny("outside-workspace", "git config --global/--system writes outside the workspace"))
    if file_target:
        hits.extend(check_write(file_target, "modify", ctx))
    if renaming:
        new = positional[1].split(".")[0].lower() if len(positional) > 1 else ""
        if new in EXEC_SECTIONS or "$" in new:
            hits.append(deny("git-exec", f"renaming a section to {new!r} can create keys that run commands"))
    elif positional:
        hits.extend(_key_hits(positional[0], "git config"))
    return [h for h in hits if h.verdict > Verdict.ALLOW]


def _push(rest: list[str]) -> list[Decision]:
    force = any(a in ("-f", "--force", "--mirror") or a.startswith("--force-with-lease") for a in rest)
    force = force or any(a.startswith("+") for a in rest)
    if force and any(re.search(r"(^|[:+/])(main|master)$", a) for a in rest):
        return [deny("force-push-main", "force push to main/master rewrites shared history")]
    if force or any(a.startswith(":") or a in ("--delete", "-d") for a in rest):
        return [confirm("force-push", "force push or branch deletion")]
    return []

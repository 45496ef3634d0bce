"""Per-binary argument rules: allowlisting a binary never allows running code through it.

``allow_binaries`` lets a binary run without asking, but many binaries run other programs when given the
right arguments. :data:`CHECKERS` maps a binary name to the function that knows its ways in; each returns
built-in decisions that the strictest-wins rule combines with the allowlist (so a confirm or deny here
beats the allowlist):

========================  ==============================================================================
git                       :mod:`mnemo.policy.gitargs` (``-c``, ``config`` of executable keys, ``!`` aliases,
                          ``--exec-path``, ``--upload-pack``, hooks, filters, pager, sshCommand, include)
find                      ``-exec``/``-execdir``/``-ok`` (the command is checked, and needs its own
                          allowlisting), ``-delete`` (confirm), ``-fprint*``/``-fls`` (a write target)
tar                       ``--to-command``, ``-I``/``--use-compress-program`` (unless a known compressor),
                          ``--checkpoint-action=exec``, ``-F``/``--info-script``, ``--rsh-command``
rsync                     ``-e``/``--rsh`` (unless plain ssh), ``--rsync-path``
ssh, scp, sftp            ``ProxyCommand``, ``LocalCommand``, ``KnownHostsCommand`` (deny), other ``-o``
                          and ``-F`` (confirm), ``-R`` (deny), ``scp -S`` (deny)
awk, sed                  :mod:`mnemo.policy.inline` (``system``, pipes, ``print >``; ``e``, ``w``; a
                          script or program file, ``-f``: confirm)
python, perl, node ...    :mod:`mnemo.policy.inline` (inline code), ``-m pip``
sh -c, bash -c            the string is checked as a command line
less, more, vim, vi ...   confirm: interactive programs with shell escapes
make, npm, pip, yarn ...  confirm, except read-only subcommands (``npm ls``, ``pip list`` ...)
watch, flock, strace ...  confirm: they run another command
========================  ==============================================================================
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from mnemo.policy import gitargs, inline
from mnemo.policy.shell import Segment, is_inside, resolve_path
from mnemo.policy.targets import check_write
from mnemo.policy.verdict import Context, Decision, confirm, deny

Checker = Callable[[Segment, Context], list[Decision]]

COMPRESSORS = frozenset({"gzip", "gunzip", "pigz", "bzip2", "pbzip2", "xz", "pxz", "zstd", "unzstd", "lz4"})
COMPRESSORS |= {"lzip", "lzma", "lzop", "brotli", "compress"}
SAFE_SSH_OPTIONS = frozenset(
    [
        "stricthostkeychecking",
        "userknownhostsfile",
        "connecttimeout",
        "batchmode",
        "port",
        "user",
        "identityfile",
        "serveraliveinterval",
        "serveralivecountmax",
        "loglevel",
        "compression",
        "identitiesonly",
        "passwordauthentication",
        "pubkeyauthentication",
        "connectionattempts",
        "hostname",
        "addressfamily",
        "ciphers",
    ]
)
EXEC_SSH_OPTIONS = frozenset({"proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand"})
INTERACTIVE = frozenset({"less", "more", "most", "pg", "vim", "vi", "view", "nvim", "vimdiff", "ex", "ed"})
INTERACTIVE |= {"emacs", "nano", "pico", "joe", "mg", "man", "info", "screen", "tmux", "gdb", "lldb"}
RUNNERS = frozenset({"watch", "flock", "script", "strace", "ltrace", "parallel", "taskset", "chrt"})
RUNNERS |= {"prlimit", "unbuffer", "xvfb-run", "faketime", "chronic", "ts", "entr", "inotifywait"}
PACKAGE_READ_ONLY: dict[str, frozenset[str]] = {
    "npm": frozenset({"ls", "list", "view", "info", "show", "outdated", "help", "search", "audit", "whoami"}),
    "yarn": frozenset({"list", "info", "why", "outdated", "help", "--version", "-v"}),
    "pnpm": frozenset({"ls", "list", "why", "outdated", "help"}),
    "pip": frozenset({"list", "show", "freeze", "check", "help", "search", "index", "inspect", "hash"}),
    "uv": frozenset({"--version", "version", "help", "tree"}),
    "poetry": frozenset({"show", "check", "--version", "version", "help"}),
    "gem": frozenset({"list", "search", "info", "help", "environment", "contents", "specification"}),
    "cargo": frozenset({"--version", "-V", "version", "metadata", "tree", "search", "help", "fmt"}),
    "go": frozenset({"version", "env", "fmt", "doc", "list", "help"}),
    "make": frozenset({"--version", "-v", "--help", "-h"}),
}
ALWAYS_CONFIRM = frozenset({"npx", "bunx", "pipx", "gmake", "cmake", "ninja", "just", "rake", "tox", "nox"})


def check_binary(seg: Segment, ctx: Context) -> list[Decision]:
    """The per-binary argument rules for ``seg`` (empty when its binary has none)."""
    name = seg.name
    checker = CHECKERS.get(name)
    if checker is None and re.match(r"^pip[0-9.]*$", name):
        checker = _package
    hits = checker(seg, ctx) if checker else []
    if inline.SHELLS.match(name):
        hits.extend(_shell(seg, ctx))
    else:
        hits.extend(inline.check_interpreter(seg, ctx))
        if name.startswith("python") and "-m" in seg.argv[1:-1]:
            module = seg.argv[seg.argv.index("-m") + 1]
            if module.startswith("pip"):
                hits.extend(
                    _package(Segment(words=[], argv=["pip", *seg.argv[seg.argv.index("-m") + 2 :]]), ctx)
                )
    if "env" in seg.wrappers:
        hits.extend(_env_chdir(seg, ctx))
    if name in INTERACTIVE:
        hits.append(confirm("shell-escape", f"{name} is interactive and can run shell commands"))
    if name in RUNNERS:
        hits.append(confirm("runs-command", f"{name} runs another command"))
    if name in ALWAYS_CONFIRM:
        hits.append(confirm("runs-project-code", f"{name} runs project or downloaded code"))
    return hits


def _shell(seg: Segment, ctx: Context) -> list[Decision]:
    """``sh -c STRING``: the string is a command line, checked with the configured rules."""
    args = seg.argv[1:]
    for i, a in enumerate(args[:-1]):
        if re.match(r"^-[a-zA-Z]*c[a-zA-Z]*$", a) and not a.startswith("--"):
            return [ctx.recurse(args[i + 1])]
    if seg.name == "busybox" and args:
        return [confirm("runs-command", "busybox runs another command"), ctx.recurse(shlex.join(args))]
    return []


FIND_READERS = frozenset(
    ("cat", "grep", "egrep", "fgrep", "rg", "head", "tail", "wc", "ls", "file", "stat", "du", "echo", "printf",
     "basename", "dirname", "realpath", "readlink", "sha256sum", "sha1sum", "md5sum", "cksum", "true")
)  # fmt: skip
"""What ``find -exec CMD {}`` may run on every file it matches without asking: commands that only read."""


def _find(seg: Segment, ctx: Context) -> list[Decision]:
    args = seg.argv[1:]
    hits: list[Decision] = []
    roots = [a for a in args if not a.startswith(("-", "(", "!", ")"))][:1] or ["."]
    acting = {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
    if acting & set(args):
        for root in roots:
            hits.extend(d for d in check_write(root, "modify", ctx) if d.rule != "builtin:memory-write")
            if not is_inside(resolve_path(root, ctx.base), ctx.ws):
                hits.append(deny("destructive", "find acting on files outside the workspace"))
    if "-delete" in args:
        hits.append(confirm("find-delete", "find -delete removes every file it matches"))
    for i, a in enumerate(args):
        if a in ("-exec", "-execdir", "-ok", "-okdir"):
            words: list[str] = []
            for w in args[i + 1 :]:
                if w in (";", "+"):
                    break
                words.append(w)
            inner = [w for w in words if w != "{}"] or ["true"]
            hits.append(ctx.recurse(shlex.join(inner)))
            if "{}" in words and inner[0].rsplit("/", 1)[-1] not in FIND_READERS:
                # `-exec rm {}`: the files it acts on are those find matches, which no check can see.
                hits.append(confirm("find-exec", f"find runs {inner[0]} on every file it matches"))
        elif a in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(args):
            hits.extend(check_write(args[i + 1], "truncate", ctx))
    return hits


def _tar(seg: Segment, ctx: Context) -> list[Decision]:
    args = seg.argv[1:]
    hits: list[Decision] = []
    for i, a in enumerate(args):
        name, has_value, value = a.partition("=")
        nxt = args[i + 1] if i + 1 < len(args) else ""
        cluster = re.match(r"^-?[A-Za-z]+$", a) and not a.startswith("--") and (a.startswith("-") or i == 0)
        if name in ("--use-compress-program", "-I") or (cluster and "I" in a):
            program = value if has_value else nxt
            if shlex.split(program or "x")[0] not in COMPRESSORS:
                hits += [confirm("tar-exec", "tar runs a compression program"), ctx.recurse(program or "x")]
        elif name in (
            "--to-command",
            "--info-script",
            "--new-volume-script",
            "--rsh-command",
            "--rmt-command",
        ):
            hits += [confirm("tar-exec", f"tar {name} runs a command"), ctx.recurse(value or nxt or "x")]
        elif name == "--checkpoint-action" and re.match(r"^(exec|sleep)?=?", value or nxt):
            if "exec" in (value or nxt):
                hits.append(confirm("tar-exec", "tar --checkpoint-action=exec runs a command"))
        elif cluster and "F" in a:
            hits.append(confirm("tar-exec", "tar -F runs a script at each volume"))
        elif name in ("-P", "--absolute-names"):
            hits.append(confirm("tar-absolute", "tar -P writes to absolute paths"))
    return hits


def _rsync(seg: Segment, ctx: Context) -> list[Decision]:
    args = seg.argv[1:]
    hits: list[Decision] = []
    for i, a in enumerate(args):
        name, has_value, value = a.partition("=")
        program = ""
        if name in ("--rsh", "-e"):
            program = value if has_value else (args[i + 1] if i + 1 < len(args) else "")
        elif re.match(r"^-[a-zA-Z]*e", a) and not a.startswith("--"):
            rest = a[a.index("e") + 1 :]
            program = rest or (args[i + 1] if i + 1 < len(args) else "")
        elif name == "--rsync-path":
            hits.append(confirm("rsync-exec", "rsync --rsync-path runs a command on the other side"))
        if program:
            words = shlex.split(program) if program.strip() else [""]
            if words[0] == "ssh":
                hits.extend(_ssh(Segment(words=words, argv=words), ctx))
            else:
                hits += [confirm("rsync-exec", f"rsync -e runs {words[0]!r}"), ctx.recurse(program)]
    return hits


def _ssh(seg: Segment, ctx: Context) -> list[Decision]:
    args = seg.argv[1:]
    hits: list[Decision] = []
    for i, a in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        option = a[2:] if a.startswith("-o") and len(a) > 2 else nxt if a == "-o" else ""
        key = re.split(r"[=\s]", option.strip(), maxsplit=1)[0].lower()
        if key in EXEC_SSH_OPTIONS:
            hits.append(deny("ssh-exec", f"{seg.name} -o {key} runs a local command"))
        elif key and key not in SAFE_SSH_OPTIONS:
            hits.append(confirm("ssh-option", f"{seg.name} -o {key}: an option mnemo does not know"))
        elif seg.name == "ssh" and re.match(r"^-[a-zA-Z]*R", a):
            hits.append(deny("network", "ssh remote forwarding"))
        elif a == "-F" or (a.startswith("-F") and seg.name == "ssh"):
            hits.append(confirm("ssh-option", f"{seg.name} -F: a config file may run commands"))
        elif a in ("-S", "-D") and seg.name in ("scp", "sftp"):
            hits.append(deny("ssh-exec", f"{seg.name} {a} runs a program of your choosing"))
    return hits


def _package(seg: Segment, ctx: Context) -> list[Decision]:
    """make, npm, pip, yarn ...: scripts, builds and installs run project code → confirm."""
    name = "pip" if seg.name.startswith("pip") else seg.name
    positional = [a for a in seg.argv[1:] if not a.startswith("-")]
    sub = positional[0] if positional else next(iter(seg.argv[1:2]), "")
    if name == "make" and all(a in PACKAGE_READ_ONLY["make"] for a in seg.argv[1:]) and seg.argv[1:]:
        return []
    if name != "make" and (sub in PACKAGE_READ_ONLY.get(name, ()) or sub in ("--version", "-V", "--help")):
        return []
    what = f"{name} {sub}".strip()
    return [confirm("runs-project-code", f"{what} runs project or package code (scripts, builds, installs)")]


def _env_chdir(seg: Segment, ctx: Context) -> list[Decision]:
    """``env -C DIR`` runs the command elsewhere."""
    words = seg.words
    for i, w in enumerate(words[:-1]):
        if w in ("-C", "--chdir") and not is_inside(resolve_path(words[i + 1], ctx.base), ctx.ws):
            return [
                deny("outside-workspace", f"env -C {words[i + 1]} runs the command outside the workspace")
            ]
    return []


CHECKERS: dict[str, Checker] = {
    "git": gitargs.check_git,
    "find": _find,
    "tar": _tar,
    "rsync": _rsync,
    **dict.fromkeys(("ssh", "scp", "sftp"), _ssh),
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), inline.check_awk),
    "sed": inline.check_sed,
    **dict.fromkeys(PACKAGE_READ_ONLY, _package),
}

"""Built-in rules: destructive, exfiltrating, persistent, privileged and network-abusing commands.

These run on every exec segment and every file path before the configured rules, and configuration
cannot relax them (deny wins); :mod:`mnemo.policy.binaries` adds the argument rules of binaries that can
run code, :mod:`mnemo.policy.targets` checks redirections and protected files. Rule names
(``builtin:<name>``) are what ``mnemo policy check`` prints.
"""

from __future__ import annotations

import re
from pathlib import Path

from mnemo.policy.inline import sed_flag
from mnemo.policy.shell import Segment, is_hijack, is_inside, is_safe_target, resolve_path
from mnemo.policy.targets import Mode, check_write, write_decision
from mnemo.policy.verdict import Context, Decision, Verdict, confirm, deny

DENY_BINARIES: dict[str, str] = {
    **dict.fromkeys(("sudo", "su", "doas", "pkexec", "runuser", "visudo", "chroot", "nsenter"), "privilege"),
    **dict.fromkeys(
        ("passwd", "chpasswd", "useradd", "usermod", "userdel", "adduser", "deluser"), "privilege"
    ),
    **dict.fromkeys(("groupadd", "gpasswd", "setcap", "insmod", "modprobe", "rmmod", "sysctl"), "privilege"),
    **dict.fromkeys(("mount", "umount", "swapon", "swapoff", "mke2fs", "mkswap", "wipefs"), "disk"),
    **dict.fromkeys(("fdisk", "sfdisk", "cfdisk", "sgdisk", "parted", "blkdiscard", "losetup"), "disk"),
    **dict.fromkeys(("shutdown", "reboot", "halt", "poweroff", "telinit", "init"), "power"),
    **dict.fromkeys(("at", "batch", "launchctl"), "persistence"),
}
SECRET_RE = re.compile(
    r"(^|[/=@:])(\.ssh|\.gnupg|\.aws|\.azure|\.kube|\.docker/config\.json|\.netrc|\.git-credentials"
    r"|\.pgpass|\.config/gcloud|\.config/gh|id_(rsa|dsa|ecdsa|ed25519)\b|shadow|gshadow|sudoers"
    r"|audit\.key)(/|$|\b)"
)
PERSIST_RE = re.compile(
    r"(^|/)(\.(bash|zsh)rc|\.bash_profile|\.bash_login|\.profile|\.zprofile|\.config/autostart"
    r"|\.config/systemd|\.git/hooks|\.git/config|mnemo\.toml|crontab|cron\.d|cron\.(daily|hourly))(/|$)"
)
INTERPRETERS = re.compile(r"^(sh|bash|zsh|dash|ksh|mksh|fish|csh|tcsh|python[0-9.]*|perl|ruby|node|php|lua)$")
NET_CLIENTS = frozenset({"curl", "wget", "nc", "ncat", "netcat", "socat", "ssh", "scp", "sftp", "rsync"})
NET_CLIENTS |= {"ftp", "telnet", "openssl", "nc.traditional", "nc.openbsd"}
SECRET_VAR = re.compile(r"\$\{?[A-Z0-9_]*(SECRET|TOKEN|PASSW|API_?KEY|PRIVATE|CREDENTIAL)", re.I)
DUMPERS = frozenset({"env", "printenv", "set", "export", "declare", "history", "compgen"})
WRITE_ALL = frozenset({"rm", "rmdir", "unlink", "shred", "touch", "mkdir", "truncate", "tee", "mv", "chattr"})
WRITE_LAST = frozenset({"cp", "install", "ln", "rsync", "scp"})
WRITE_AFTER_FIRST = frozenset({"chmod", "chown", "chgrp"})
SAFE_BUILTINS = frozenset({"cd", "pushd", "popd", "true", "false", ":", "echo", "printf", "test", "[", "pwd"})
SAFE_BUILTINS |= {"export", "unset", "read", "shift", "exit", "return", "wait", "type", "local", "readonly"}
RECURSIVE = re.compile(r"^(-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)$")


_deny = deny


def _positional(argv: list[str]) -> list[str]:
    out: list[str] = []
    after_dashdash = False
    for arg in argv[1:]:
        if arg == "--" and not after_dashdash:
            after_dashdash = True
        elif after_dashdash or not arg.startswith("-") or arg == "-":
            out.append(arg)
    return out


def _values(seg: Segment) -> list[str]:
    """Every word and redirect target, plus the value side of ``k=v``, ``--opt=v`` and ``@file``."""
    values: list[str] = []
    for word in [*seg.words, *(r.target for r in seg.redirects)]:
        values.append(word)
        if "=" in word:
            values.append(word.split("=", 1)[1])
        values.extend(part for part in re.findall(r"@([^\s;]+)", word))
    return [v.lstrip("@<") for v in values]


def check_path(tool: str, raw: str, target: Path, inside: bool, ws: Path) -> list[Decision]:
    """Built-in rules for read_file / write_file paths."""
    hits: list[Decision] = []
    if SECRET_RE.search(str(target)) or SECRET_RE.search(raw):
        hits.append(_deny("secrets", f"{raw} is a credential or key file"))
    if tool == "write_file":
        if not inside:
            hits.append(_deny("outside-workspace", f"{raw} is outside the workspace"))
        elif PERSIST_RE.search(str(target.relative_to(ws))):
            hits.append(_deny("persistence", f"{raw} is a policy, hook or startup file: edit it yourself"))
        elif (decided := write_decision(raw, target, "modify", ws)) is not None:
            hits.append(decided)  # mnemo's own files, editor settings, memory: as a command's write
    elif not inside:
        hits.append(Decision(Verdict.CONFIRM, "builtin:read-outside", f"{raw} is outside the workspace"))
    return hits


def _sed_in_place(arg: str) -> bool:
    """``-i``, ``-i.bak``, ``--in-place``, or ``i`` in a cluster of sed's short flags (``-Ei``, ``-ni``)."""
    return arg.startswith("--in-place") or sed_flag(arg, "i")


def _write_targets(name: str, args: list[str], pos: list[str]) -> list[tuple[str, Mode]]:
    """The paths ``name`` writes, and how."""
    found: list[tuple[str, Mode]] = []
    if name in ("rm", "rmdir", "unlink", "shred"):
        found = [(p, "delete") for p in pos]
    elif name == "mv" and pos:
        found = [(p, "modify") for p in pos[:-1]] + [(pos[-1], "truncate")]
    elif name in ("touch", "mkdir"):
        found = [(p, "create") for p in pos]
    elif name in ("truncate", "tee"):
        found = [
            (p, "append" if name == "tee" and {"-a", "--append"} & set(args) else "truncate") for p in pos
        ]
    elif name == "chattr" or (name == "sed" and any(_sed_in_place(a) for a in args)):
        scripts = name == "sed" and not any(a in ("-e", "-f") or a.startswith("--expression") for a in args)
        found = [(p, "modify") for p in (pos[1:] if scripts or name == "chattr" else pos)]
    elif name in WRITE_LAST and len(pos) >= 2:
        found = [(pos[-1], "truncate")]
    elif name in WRITE_AFTER_FIRST:
        found = [(p, "modify") for p in pos[1:]]
    elif name == "dd":
        found = [(a[3:], "truncate") for a in args if a.startswith("of=")]
    elif name in ("tar", "unzip"):
        found = [(args[i + 1], "create") for i, a in enumerate(args[:-1]) if a in ("-C", "--directory", "-d")]
    found += [
        (a.split("=", 1)[1], "truncate") for a in args if a.startswith(("--output=", "--target-directory="))
    ]
    # A value after its flag ("-t DIR", "--output FILE") or attached to it ("-tDIR", "-oFILE").
    flag = {"curl": "-o", "sort": "-o", "wget": "-O", "gcc": "-o", "cc": "-o", "clang": "-o"}.get(name)
    if name in ("cp", "mv", "install", "ln"):
        flag = "-t"
    for i, a in enumerate(args):
        if (a in ("--output", "--target-directory") and i + 1 < len(args)) or (
            flag and a == flag and i + 1 < len(args)
        ):
            found.append((args[i + 1], "truncate"))
        elif flag and a.startswith(flag) and len(a) > len(flag) and not a.startswith("--"):
            found.append((a[len(flag) :], "truncate"))
    if name == "uniq" and len(pos) >= 2:  # uniq IN OUT
        found.append((pos[1], "truncate"))
    return [(t, m) for t, m in found if ":" not in t or name not in ("rsync", "scp")]


def check_segment(seg: Segment, before: list[Segment], ctx: Context) -> list[Decision]:
    """Built-in rules for one exec segment (``before``: the segments to its left)."""
    name, argv, args, base = seg.name, seg.argv, seg.argv[1:], ctx.base
    pos = _positional(argv)
    hits: list[Decision] = []
    values = _values(seg)
    if name in DENY_BINARIES or name.startswith("mkfs"):
        hits.append(_deny(DENY_BINARIES.get(name, "disk"), f"{name} is never run by the agent"))
    if any(SECRET_RE.search(v) or SECRET_RE.search(str(resolve_path(v, base))) for v in values if "/" in v):
        hits.append(_deny("secrets", "the command touches credential or key files"))
    if any(re.search(r"/dev/(tcp|udp)/", v) for v in values):
        hits.append(_deny("reverse-shell", "/dev/tcp and /dev/udp sockets are refused"))
    hits.extend(_writes(seg, ctx, pos))
    # interpreters reading code from a pipe
    inline_flag = any(a in ("-c", "-e", "-E", "-r", "--eval") or re.match(r"^-[a-z]*c$", a) for a in args)
    if INTERPRETERS.match(name) and seg.piped and all(p == "-" for p in pos) and not inline_flag:
        hits.append(_deny("pipe-to-shell", f"piping into {name} runs unreviewed code"))
    hits.extend(_network(seg, before, ctx, pos))
    hits.extend(_system(name, args))
    hits.extend(_shell_state(name, args, pos, ctx))
    if not seg.binary and not hits:
        hits.append(_unlisted(name, argv[0]))
    return hits


def _shell_state(name: str, args: list[str], pos: list[str], ctx: Context) -> list[Decision]:
    """Builtins that change what later segments do: the working folder and hijackable variables."""
    hits: list[Decision] = []
    if name in ("cd", "pushd") and not all(
        is_inside(resolve_path(p, ctx.base), ctx.ws) for p in (pos or ["~"])
    ):
        hits.append(_deny("outside-workspace", f"{name} leaves the workspace (later paths would escape)"))
    if name in ("cd", "pushd") and any("$" in p for p in pos):
        hits.append(confirm("variable-target", f"{name} to a folder built from a variable"))
    if name in ("export", "declare", "local", "readonly", "typeset") and any(is_hijack(a) for a in args):
        hits.append(_deny("env-hijack", f"{name} of PATH/LD_PRELOAD/CDPATH-like variables is refused"))
    if name in ("read", "mapfile", "readarray", "printf", "getopts") and any(
        re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", a) and is_hijack(a) for a in args
    ):
        hits.append(_deny("env-hijack", f"{name} into PATH/IFS/CDPATH-like variables is refused"))
    return hits


def _unlisted(name: str, command: str) -> Decision:
    """A command that is not on PATH and that no rule decided: a harmless builtin, or confirm."""
    if name in SAFE_BUILTINS:
        return Decision(Verdict.ALLOW, "builtin:shell-builtin", f"{name} is a harmless shell builtin")
    return Decision(Verdict.CONFIRM, "builtin:unknown-binary", f"{command} is not on PATH")


def _writes(seg: Segment, ctx: Context, pos: list[str]) -> list[Decision]:
    """Destruction, writes outside the workspace and writes to protected files."""
    name, args, ws, base = seg.name, seg.argv[1:], ctx.ws, ctx.base
    hits: list[Decision] = []
    if name == "chmod" and pos and re.search(r"s|^[2467][0-7]{3}$", pos[0]):
        hits.append(_deny("privilege", "setuid/setgid bits are refused"))
    if name == "dd" and any(
        re.match(r"if=/dev/(sd|hd|vd|nvme|mmcblk|disk|mapper|mem|kmem)", a) for a in args
    ):
        hits.append(_deny("disk", "dd reads a raw disk"))
    found = _write_targets(name, args, pos)
    outside = [t for t, _ in found if not is_safe_target(t, ws, base)]
    if outside:
        hits.append(_deny("outside-workspace", f"{name} would modify {outside[0]} outside the workspace"))
    if any(PERSIST_RE.search(str(resolve_path(t, base))) for t, _ in found):
        hits.append(_deny("persistence", f"{name} would modify a startup, hook, cron or policy file"))
    for target, mode in found:
        if target not in outside:
            hits.extend(check_write(target, mode, ctx))
    recursive = any(RECURSIVE.match(a) for a in args)
    if name == "rm" and ("--no-preserve-root" in args or (recursive and not pos and "xargs" in seg.wrappers)):
        hits.append(_deny("destructive", "recursive delete of unchecked paths"))
    if (
        name in ("rm", "chmod", "chown", "chgrp")
        and recursive
        and any(resolve_path(t, base) == ws for t, _ in found)
    ):
        hits.append(_deny("destructive", f"recursive {name} of the whole workspace"))
    if "xargs" in seg.wrappers and (
        name in WRITE_ALL | WRITE_LAST | WRITE_AFTER_FIRST or INTERPRETERS.match(name)
    ):
        hits.append(confirm("xargs", f"xargs runs {name} on paths read from its input"))
    return hits


def _network(seg: Segment, before: list[Segment], ctx: Context, pos: list[str]) -> list[Decision]:
    """Reverse shells, uploads, exfiltration."""
    name, args, ws, base = seg.name, seg.argv[1:], ctx.ws, ctx.base
    hits: list[Decision] = []
    if name.startswith(("nc", "ncat", "netcat")) and any(
        a in ("-e", "-c", "--exec", "--sh-exec") for a in args
    ):
        hits.append(_deny("reverse-shell", f"{name} -e hands a shell to the network"))
    if name == "socat" and any(re.search(r"(exec|system):", a, re.I) for a in args):
        hits.append(_deny("reverse-shell", "socat exec:/system: runs commands for the network"))
    if name not in NET_CLIENTS:
        return hits
    uploads = [v for a in args for v in re.findall(r"(?:^|=)[@<]([^;]+)$", a) if v != "-"]
    uploads += [a.split("=", 1)[1] for a in args if a.startswith(("--post-file=", "--body-file="))]
    uploads += [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-T", "--upload-file")]
    uploads += [r.target for r in seg.redirects if r.op in ("<", "<>")]
    if name in ("scp", "rsync", "sftp") and any(":" in p for p in pos[-1:]):
        uploads += [p for p in pos[:-1] if ":" not in p]
    if any(not is_inside(resolve_path(u, base), ws) for u in uploads):
        hits.append(_deny("exfiltration", f"{name} sends a file from outside the workspace"))
    if any(SECRET_VAR.search(a) for a in args):
        hits.append(_deny("exfiltration", f"{name} sends a secret environment variable"))
    if seg.piped and any(b.name in DUMPERS or _reads_outside(b, ws) for b in before):
        hits.append(
            _deny("exfiltration", f"{name} sends the environment or files from outside the workspace")
        )
    return hits


def _system(name: str, args: list[str]) -> list[Decision]:
    """Persistence, services, firewall, processes, containers."""
    hits: list[Decision] = []
    if name == "crontab" and args != ["-l"]:
        hits.append(_deny("persistence", "crontab edits are refused"))
    if name == "systemctl" and any(
        a in ("enable", "link", "edit", "mask", "set-default", "preset") for a in args
    ):
        hits.append(_deny("persistence", "systemctl enable/link/edit installs a service"))
    if name == "systemctl" and any(a in ("reboot", "poweroff", "halt", "kexec", "isolate") for a in args):
        hits.append(_deny("power", "systemctl power actions are refused"))
    listing = all(a in ("-L", "-S", "-n", "-v", "list", "status", "ruleset", "--list-all") for a in args)
    if name in ("iptables", "ip6tables", "nft", "ufw", "firewall-cmd") and not listing:
        hits.append(_deny("network", f"{name} changes the firewall"))
    if name in ("kill", "pkill", "killall") and any(p in ("-1", "1") for p in args[-1:]):
        hits.append(_deny("destructive", "killing every process (or init) is refused"))
    if name in ("docker", "podman") and any(a == "--privileged" or re.match(r"^/(:|$)", a) for a in args):
        hits.append(_deny("privilege", f"{name} with --privileged or the host root mounted"))
    return hits


def _reads_outside(seg: Segment, ws: Path) -> bool:
    paths = [p for p in _positional(seg.argv) if "/" in p or p.startswith(("~", "$"))]
    paths += [r.target for r in seg.redirects if r.op == "<"]
    return any(not is_safe_target(p, ws) for p in paths)

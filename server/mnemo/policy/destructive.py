"""Built-in rules: destructive, exfiltrating, persistent, privileged and network-abusing commands.

These run on every exec segment and every file path before the configured rules, and configuration
cannot relax them (deny wins). Rule names (``builtin:<name>``) are what ``mnemo policy check`` prints.
"""

from __future__ import annotations

import re
from pathlib import Path

from mnemo.policy.rules import Decision, PolicyConfig, Verdict, check_command
from mnemo.policy.shell import HIJACK_VARS, Segment, _unwrap, is_inside, is_safe_target, resolve_path

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
SHELLS = re.compile(r"^(sh|bash|zsh|dash|ksh|mksh|fish|csh|tcsh)$")
RISKY_CODE = re.compile(
    r"socket|pty|subprocess|os\.(system|popen|exec|remove|unlink)|child_process|rmtree|/dev/tcp"
)
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


def _deny(name: str, reason: str) -> Decision:
    return Decision(Verdict.DENY, f"builtin:{name}", reason)


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
        elif PERSIST_RE.search(str(target.relative_to(ws)) if inside else str(target)):
            hits.append(_deny("persistence", f"{raw} is a policy, hook or startup file: edit it yourself"))
    elif not inside:
        hits.append(Decision(Verdict.CONFIRM, "builtin:read-outside", f"{raw} is outside the workspace"))
    return hits


def check_segment(
    seg: Segment, before: list[Segment], ws: Path, cfg: PolicyConfig, depth: int
) -> list[Decision]:
    """Built-in rules for one exec segment (``before``: the segments to its left)."""
    name, argv, args = seg.name, seg.argv, seg.argv[1:]
    pos = _positional(argv)
    hits: list[Decision] = []
    values = _values(seg)
    if name in DENY_BINARIES or name.startswith("mkfs"):
        hits.append(_deny(DENY_BINARIES.get(name, "disk"), f"{name} is never run by the agent"))
    if any(SECRET_RE.search(v) or SECRET_RE.search(str(resolve_path(v, ws))) for v in values if "/" in v):
        hits.append(_deny("secrets", "the command touches credential or key files"))
    if any(re.search(r"/dev/(tcp|udp)/", v) for v in values):
        hits.append(_deny("reverse-shell", "/dev/tcp and /dev/udp sockets are refused"))
    # destruction and writes outside the workspace
    targets: list[str] = []
    if name in WRITE_ALL or (name == "sed" and any(a.startswith(("-i", "--in-place")) for a in args)):
        targets = pos[1:] if name == "sed" and not any(a in ("-e", "-f") for a in args) else pos
    elif name in WRITE_LAST and len(pos) >= 2:
        targets = [pos[-1]] + [a.split("=", 1)[1] for a in args if a.startswith("--target-directory=")]
    elif name in WRITE_AFTER_FIRST:
        targets = pos[1:]
        if name == "chmod" and pos and re.search(r"s|^[2467][0-7]{3}$", pos[0]):
            hits.append(_deny("privilege", "setuid/setgid bits are refused"))
    elif name == "dd":
        targets = [a[3:] for a in args if a.startswith("of=")]
        if any(re.match(r"if=/dev/(sd|hd|vd|nvme|mmcblk|disk|mapper|mem|kmem)", a) for a in args):
            hits.append(_deny("disk", "dd reads a raw disk"))
    elif name in ("tar", "unzip"):
        targets = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-C", "--directory", "-d")]
    targets += [a.split("=", 1)[1] for a in args if a.startswith(("--output=", "--target-directory="))]
    if "-t" in args and args.index("-t") + 1 < len(args):
        targets.append(args[args.index("-t") + 1])
    outside = [t for t in targets if ":" not in t or name not in ("rsync", "scp")]
    outside = [t for t in outside if not is_safe_target(t, ws)]
    if outside:
        hits.append(_deny("outside-workspace", f"{name} would modify {outside[0]} outside the workspace"))
    if any(PERSIST_RE.search(str(resolve_path(t, ws))) for t in targets):
        hits.append(_deny("persistence", f"{name} would modify a startup, hook, cron or policy file"))
    recursive = any(RECURSIVE.match(a) for a in args)
    if name == "rm" and ("--no-preserve-root" in args or (recursive and not pos and "xargs" in seg.wrappers)):
        hits.append(_deny("destructive", "recursive delete of unchecked paths"))
    if (
        name in ("rm", "chmod", "chown", "chgrp")
        and recursive
        and any(resolve_path(t, ws) == ws for t in targets)
    ):
        hits.append(_deny("destructive", f"recursive {name} of the whole workspace"))
    if name == "find":
        roots = [a for a in args if not a.startswith(("-", "(", "!", ")"))][:1] or ["."]
        acting = any(a in ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint") for a in args)
        if acting and not all(is_safe_target(r, ws) for r in roots):
            hits.append(_deny("destructive", "find acting on files outside the workspace"))
        for i, a in enumerate(args):
            if a in ("-exec", "-execdir", "-ok", "-okdir"):
                inner = Segment(words=[w for w in args[i + 1 :] if w not in (";", "+", "{}")][:20])
                _unwrap(inner, None)
                if inner.argv:
                    hits.extend(check_segment(inner, [], ws, cfg, depth + 1))
    # interpreters: piped code, -c strings, inline code
    interp = bool(INTERPRETERS.match(name))
    if interp and seg.piped and all(p == "-" for p in pos) and "-c" not in args and "-e" not in args:
        hits.append(_deny("pipe-to-shell", f"piping into {name} runs unreviewed code"))
    if interp:
        for i, a in enumerate(args[:-1]):
            if a in ("-c", "-e", "--eval", "-E", "-r") or (SHELLS.match(name) and re.match(r"^-[a-z]*c$", a)):
                code = args[i + 1]
                if SHELLS.match(name):
                    if depth >= 3:
                        hits.append(_deny("nesting", "shell -c nested too deeply"))
                    else:
                        hits.append(check_command(code, ws, cfg, depth + 1))
                elif RISKY_CODE.search(code):
                    hits.append(_deny("inline-code", f"{name} inline code with process or socket access"))
                break
    # network: reverse shells, uploads, exfiltration
    if name.startswith(("nc", "ncat", "netcat")) and any(
        a in ("-e", "-c", "--exec", "--sh-exec") for a in args
    ):
        hits.append(_deny("reverse-shell", f"{name} -e hands a shell to the network"))
    if name == "socat" and any(re.search(r"(exec|system):", a, re.I) for a in args):
        hits.append(_deny("reverse-shell", "socat exec:/system: runs commands for the network"))
    if name == "ssh" and any(
        re.match(r"-[a-zA-Z]*R|.*(ProxyCommand|LocalCommand|PermitLocal)", a) for a in args
    ):
        hits.append(_deny("network", "ssh remote forwarding or local command execution"))
    if name in NET_CLIENTS:
        uploads = [v for a in args for v in re.findall(r"(?:^|=)[@<]([^;]+)$", a) if v != "-"]
        uploads += [a.split("=", 1)[1] for a in args if a.startswith(("--post-file=", "--body-file="))]
        uploads += [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-T", "--upload-file")]
        uploads += [r.target for r in seg.redirects if r.op in ("<", "<>")]
        if name in ("scp", "rsync", "sftp") and any(":" in p for p in pos[-1:]):
            uploads += [p for p in pos[:-1] if ":" not in p]
        if any(not is_inside(resolve_path(u, ws), ws) for u in uploads):
            hits.append(_deny("exfiltration", f"{name} sends a file from outside the workspace"))
        if any(SECRET_VAR.search(a) for a in args):
            hits.append(_deny("exfiltration", f"{name} sends a secret environment variable"))
        if seg.piped and any(b.name in DUMPERS or _reads_outside(b, ws) for b in before):
            hits.append(
                _deny("exfiltration", f"{name} sends the environment or files from outside the workspace")
            )
    # persistence, services, firewall, processes, git
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
    if name == "git":
        hits.extend(_git(args))
    if name in ("cd", "pushd") and not all(is_inside(resolve_path(p, ws), ws) for p in (pos or ["~"])):
        hits.append(_deny("outside-workspace", f"{name} leaves the workspace (later paths would escape)"))
    exported = [re.split(r"[+=]", a, maxsplit=1)[0] for a in args]
    if name in ("export", "declare", "local", "readonly", "typeset") and HIJACK_VARS.intersection(exported):
        hits.append(_deny("env-hijack", f"{name} of PATH/LD_PRELOAD-like variables is refused"))
    if not seg.binary and not hits and name in SAFE_BUILTINS:
        hits.append(Decision(Verdict.ALLOW, "builtin:shell-builtin", f"{name} is a harmless shell builtin"))
    if not seg.binary and not hits:
        hits.append(Decision(Verdict.CONFIRM, "builtin:unknown-binary", f"{argv[0]} is not on PATH"))
    return hits


def _reads_outside(seg: Segment, ws: Path) -> bool:
    paths = [p for p in _positional(seg.argv) if "/" in p or p.startswith(("~", "$"))]
    paths += [r.target for r in seg.redirects if r.op == "<"]
    return any(not is_safe_target(p, ws) for p in paths)


def _git(args: list[str]) -> list[Decision]:
    if args[:1] == ["config"] and any(
        re.search(r"hookspath|sshcommand|fsmonitor|askpass", a, re.I) for a in args
    ):
        return [_deny("persistence", "git config that runs commands (hooksPath, sshCommand, fsmonitor)")]
    if args[:1] != ["push"]:
        return []
    force = any(a in ("-f", "--force", "--mirror") or a.startswith("--force-with-lease") for a in args)
    force = force or any(a.startswith("+") for a in args[1:])
    if force and any(re.search(r"(^|[:+/])(main|master)$", a) for a in args[1:]):
        return [_deny("force-push-main", "force push to main/master rewrites shared history")]
    if force or any(a.startswith(":") or a in ("--delete", "-d") for a in args[1:]):
        return [Decision(Verdict.CONFIRM, "builtin:force-push", "force push or branch deletion")]
    return []

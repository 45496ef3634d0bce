"""Inert Git: every ``git`` mnemo runs on the host executes nothing the repository asks for.

A workspace's ``.git/config`` is writable by whatever can write the workspace (an agent's tool call
included), and Git runs commands from it: ``core.fsmonitor``, hooks, pagers, filters, textconv, aliases
and more. mnemo's own Git (commit, history, the blame in hovers) runs outside the sandbox, so:

* each call runs with :data:`INERT_CONFIG` (``-c core.hooksPath=/dev/null -c core.fsmonitor=false`` ...),
  ``--no-pager``, no system or global config (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``)
  and an environment built from scratch (no ``GIT_*`` variable but the ones set here and the author /
  committer identity; ``GIT_TERMINAL_PROMPT=0``; no askpass, external diff or editor);
* before any operation, the repository's config files are read with ``git config --list`` (Git's own
  parser, so mnemo and Git agree on what a file says) and a key that names a command
  (:func:`executable_key`) refuses the repository with :class:`UnsafeRepository`, naming the key.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from mnemo.errors import MnemoError
from mnemo.index import racy

GIT_TIMEOUT_S = 60.0

INERT_CONFIG: tuple[str, ...] = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.sshCommand=false",
    "core.askPass=",
    "core.untrackedCache=false",
    "credential.helper=",
    "diff.external=",
    "protocol.allow=never",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "gc.auto=0",
    "maintenance.auto=false",
)
"""``-c`` settings of every call: they win over the repository's config for these keys."""

# Keys naming a command Git may run (lower-case section and variable names; ``*`` any subsection).
_ALWAYS = (
    "core.hookspath",
    "core.pager",
    "core.sshcommand",
    "core.editor",
    "core.askpass",
    "core.gitproxy",
    "core.alternaterefscommand",
    "sequence.editor",
    "include.*",
    "includeif.*",
    "credential.helper",
    "credential.*.helper",
    "gpg.program",
    "gpg.*.program",
    "gpg.ssh.defaultkeycommand",
    "uploadpack.*",
    "receivepack.*",
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "diff.external",
    "diff.*.textconv",
    "diff.*.command",
    "merge.*.driver",
    "pager.*",
    "interactive.difffilter",
    "difftool.*.cmd",
    "mergetool.*.cmd",
    "guitool.*.cmd",
    "browser.*.cmd",
    "man.*.cmd",
    "trailer.*.command",
    "trailer.*.cmd",
    "sendemail.tocmd",
    "sendemail.cccmd",
    "sendemail.smtpserver",
)
_FSMONITOR_OFF = {"", "false", "no", "off", "0", "true", "yes", "on", "1"}
"""Booleans: Git's built-in daemon or nothing (the override turns it off anyway). Anything else is a command."""


class UnsafeRepository(MnemoError):
    """The repository's config sets a key that makes Git run a command."""

    def __init__(self, config: Path, key: str, value: str) -> None:
        self.config, self.key, self.value = config, key, value
        shown = value if len(value) <= 60 else value[:59] + "…"
        super().__init__(
            f"refusing to run git: {config} sets {key} = {shown!r}, a command git would run outside the "
            f"sandbox; remove it (git config --file {config} --unset-all {key}) if you did not set it"
        )


class GitFailed(MnemoError):
    """``git`` exited with an error (the message is its stderr)."""


def executable_key(key: str, value: str) -> bool:
    """Whether config ``key`` (as ``git config --list`` prints it) with ``value`` makes Git run a command."""
    name = key.lower()  # Git prints section and variable names in lower case; subsections as written
    section = name.partition(".")[0]
    if name == "core.fsmonitor":
        return value.strip().lower() not in _FSMONITOR_OFF
    if section == "alias" or (section == "submodule" and name.endswith(".update")):
        return value.lstrip().startswith("!")
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in _ALWAYS)


def _global_values(key: str) -> list[str]:
    """Every value of ``key`` in the user's global config, read as data (nothing else from it)."""
    env = {k: v for k, v in _base_env().items() if k != "GIT_CONFIG_GLOBAL"}
    try:
        done = subprocess.run(
            ["git", "config", "--global", "--no-includes", "--get-all", key],
            cwd="/",
            env=env,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    out = done.stdout.decode("utf-8", "replace") if done.returncode == 0 else ""
    return [line.strip() for line in out.splitlines() if line.strip()]


@functools.lru_cache(maxsize=1)
def _user_identity() -> tuple[str, str]:
    """user.name and user.email of the user's global config (read as data, nothing else from it)."""
    name, email = (_global_values(key) for key in ("user.name", "user.email"))
    return (name[-1] if name else ""), (email[-1] if email else "")


@functools.lru_cache(maxsize=1)
def _safe_directories() -> tuple[str, ...]:
    """The user's ``safe.directory`` entries (a repository owned by another user they trust): passed on
    with ``-c``, since the global config itself is not read."""
    return tuple(_global_values("safe.directory"))


_IDENTITY_ENV = (
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
)


def _base_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "TZ") if k in os.environ}
    env.update({k: os.environ[k] for k in _IDENTITY_ENV if k in os.environ})  # plain text, runs nothing
    env.update(
        LC_ALL="C.UTF-8",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        GIT_EDITOR=":",
        GIT_OPTIONAL_LOCKS="0",
        GIT_PROTOCOL_FROM_USER="0",
    )
    return env


@dataclass(frozen=True)
class RepoPaths:
    toplevel: Path
    git_dir: Path
    common_dir: Path


class InertGit:
    """Runs ``git`` for one repository (found from ``cwd``), inertly, after checking its config."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self._checked: tuple[tuple[int, int, int, int], ...] | None = None
        self.identity: tuple[str, str] = ("", "")

    def run(self, args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        flags = [f for path in _safe_directories() for f in ("-c", f"safe.directory={path}")]
        flags += [f for item in INERT_CONFIG for f in ("-c", item)]
        for key, value in zip(("user.name", "user.email"), self.identity, strict=True):
            if value:
                flags += ["-c", f"{key}={value}"]
        try:
            done = subprocess.run(
                ["git", "--no-pager", *flags, *args],
                cwd=self.cwd,
                env=_base_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GitFailed(f"git {args[0]} failed: {exc}") from exc
        if check and done.returncode != 0:
            raise GitFailed(done.stderr.decode("utf-8", "replace").strip() or f"git {args[0]} failed")
        return done

    def paths(self) -> RepoPaths | None:
        """The repository holding ``cwd`` (None outside any)."""
        done = self.run(
            [
                "rev-parse",
                "--path-format=absolute",
                "--show-toplevel",
                "--absolute-git-dir",
                "--git-common-dir",
            ],
            check=False,
        )
        lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
        if done.returncode != 0 and b"dubious ownership" in done.stderr:  # a repository, not trusted:
            raise GitFailed(done.stderr.decode("utf-8", "replace").strip())  # (never `git init` inside it)
        if done.returncode != 0 or len(lines) != 3:
            return None
        return RepoPaths(*(Path(line) for line in lines))

    def check(self, paths: RepoPaths) -> None:
        """Refuse the repository when a config file it reads sets an executable key."""
        files = [paths.common_dir / "config", paths.git_dir / "config.worktree"]
        if paths.git_dir != paths.common_dir:
            files.append(paths.common_dir / "config.worktree")
        stamp = tuple(_stamp(f) for f in files)
        if stamp == self._checked:
            return
        checked_at = time.time()
        identity = {"user.name": "", "user.email": ""}
        for config in files:
            if not config.exists():
                continue
            listed = self.run(["config", "--file", str(config), "--no-includes", "--null", "--list"])
            for item in filter(None, listed.stdout.split(b"\0")):
                key, _, value = item.decode("utf-8", "surrogateescape").partition("\n")
                if executable_key(key, value):
                    raise UnsafeRepository(config, key, value)
                if key.lower() in identity:
                    identity[key.lower()] = value
        global_name, global_email = _user_identity()
        self.identity = (
            "" if identity["user.name"] else global_name,
            "" if identity["user.email"] else global_email,
        )
        # Remembered only when no file changed within its clock tick of this read: a same-size rewrite
        # in that tick would leave every stamp as it was (the ctime, unlike the mtime, cannot be set back).
        self._checked = stamp if all(racy.settled(s[2] / 1e9, checked_at) for s in stamp) else None

    def __call__(self, *args: str, check: bool = True) -> bytes:
        """Output of ``git ARGS`` (raises :class:`GitFailed` when ``check`` and it fails)."""
        return self.run(list(args), check=check).stdout


def _stamp(path: Path) -> tuple[int, int, int, int]:
    """(inode, mtime, ctime, size) of a config file; the ctime: `touch -d` can put an mtime back."""
    try:
        st = path.stat()
    except OSError:
        return (0, 0, 0, 0)
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)

"""Git for memory: commit memory files only, with a message saying what changed; file and line history.

A commit stages MEMORY.md, ``memory/`` and ``skills/`` (``sessions/`` only when asked), never the index
folder, hidden or ignored paths, and nothing else the user may have staged. It refuses while a file to
be committed holds a secret (unless forced). A workspace outside any repository gets one only when the
caller says so.

Git runs inertly (:mod:`mnemo.editor.vcs_git`): no hooks, fsmonitor, pager, filters, textconv, aliases or
includes, no system or global config, and a repository whose config names a command is refused
(:class:`UnsafeRepository`, naming the key) before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

from mnemo.editor.vcs_git import GitFailed, InertGit, RepoPaths, UnsafeRepository
from mnemo.errors import MnemoError
from mnemo.markdown.structure import markdown_lines
from mnemo.secrets import scan_text
from mnemo.workspace.layout import MEMORY_FILES, FileKind, Workspace


class VcsError(MnemoError):
    """Git could not do what was asked (no repository, nothing to commit, git failed, unsafe config)."""


class UnsafeRepositoryError(VcsError):
    """The repository's config names a command git would run (see :class:`UnsafeRepository`)."""

    def __init__(self, cause: UnsafeRepository) -> None:
        self.key = cause.key
        self.config = cause.config
        super().__init__(str(cause))


class SecretsInCommit(VcsError):
    def __init__(self, findings: Sequence[tuple[str, int, str]]) -> None:
        self.findings = list(findings)
        listed = ", ".join(f"{p}:{line} {rule}" for p, line, rule in self.findings)
        super().__init__(f"refusing to commit: secrets in {listed} (redact them, or force the commit)")


@dataclass
class FileChange:
    path: str  # workspace-relative
    status: str  # A (added) | M (modified) | D (deleted)
    added: list[str] = field(default_factory=list)  # heading paths
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


@dataclass
class CommitResult:
    sha: str
    message: str
    files: list[FileChange]


@dataclass(frozen=True)
class HistoryEntry:
    sha: str
    date: str  # ISO 8601
    author: str
    subject: str


@dataclass(frozen=True)
class Repo:
    """A checked repository: where it is, and the inert ``git`` to run in it."""

    paths: RepoPaths
    git: InertGit

    @property
    def root(self) -> Path:
        return self.paths.toplevel

    def run(self, *args: str, what: str) -> str:
        try:
            return self.git(*args).decode("utf-8", "surrogateescape")
        except GitFailed as exc:
            raise VcsError(f"git {what} failed: {exc}") from exc

    def head(self) -> str | None:
        out = self.git("rev-parse", "--verify", "-q", "HEAD^{commit}", check=False).decode().strip()
        return out or None


def checked_repo(git: InertGit) -> Repo | None:
    """The repository holding ``git.cwd`` after its config passed the check; None outside any."""
    try:
        paths = git.paths()
        if paths is None:
            return None
        git.check(paths)
    except UnsafeRepository as exc:
        raise UnsafeRepositoryError(exc) from exc
    except GitFailed as exc:
        raise VcsError(f"git failed: {exc}") from exc
    return Repo(paths, git)


def open_repo(root: Path, *, init_repo: bool = False) -> Repo:
    git = InertGit(root)
    repo = checked_repo(git)
    if repo is not None:
        return repo
    if not init_repo:
        raise VcsError(
            f"{root} is not in a Git repository; confirm creating one (mnemo commit --init, "
            "or initRepo: true)"
        )
    try:
        git("init", "-q")
    except GitFailed as exc:
        raise VcsError(f"git init failed: {exc}") from exc
    repo = checked_repo(git)
    if repo is None:
        raise VcsError(f"git init did not make a repository at {root}")
    return repo


_HEADING = re.compile(r" {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")


def sections(text: str) -> dict[str, str]:
    """Heading path (``## A > ### B`` style, marks included) -> the section's own body text."""
    out: dict[str, list[str]] = {}
    stack: list[tuple[int, str]] = []
    current = ""
    lines = text.splitlines()
    for line, markdown in zip(lines, markdown_lines(lines), strict=True):
        m = _HEADING.match(line) if markdown else None  # (in fenced code or an HTML comment: text)
        if m:
            level = len(m.group(1))
            stack = [(lv, h) for lv, h in stack if lv < level] + [(level, f"{m.group(1)} {m.group(2)}")]
            current = " > ".join(h for _, h in stack)
            out.setdefault(current, [])
        else:
            out.setdefault(current, []).append(line)
    return {k: "\n".join(v).strip() for k, v in out.items() if k}


def describe(old: str | None, new: str | None, path: str) -> FileChange:
    before, after = sections(old or ""), sections(new or "")
    status = "A" if old is None else "D" if new is None else "M"
    return FileChange(
        path,
        status,
        added=[h for h in after if h not in before],
        changed=[h for h in after if h in before and after[h] != before[h]],
        removed=[h for h in before if h not in after],
    )


def summary(changes: Sequence[FileChange], subject: str | None = None) -> str:
    counts = [sum(len(getattr(c, kind)) for c in changes) for kind in ("added", "changed", "removed")]
    tally = ", ".join(f"{sign}{n}" for sign, n in zip("+~-", counts, strict=True) if n)
    names = ", ".join(c.path for c in changes[:3]) + (
        f" and {len(changes) - 3} more" if len(changes) > 3 else ""
    )
    head = subject or f"memory: update {names}" + (f" ({tally} sections)" if tally else "")
    body = []
    for c in changes:
        body.append(f"{c.status} {c.path}")
        body += [f"  + {h}" for h in c.added] + [f"  ~ {h}" for h in c.changed]
        body += [f"  - {h}" for h in c.removed]
    return head + "\n\n" + "\n".join(body) + "\n"


class MemoryRepo:
    """Git operations on a workspace's memory files."""

    def __init__(self, workspace: Workspace, *, include_sessions: bool = False) -> None:
        self.workspace = workspace
        self.include_sessions = include_sessions

    def _tops(self) -> list[str]:
        return [*MEMORY_FILES, "memory", "skills"] + (["sessions"] if self.include_sessions else [])

    def _is_memory(self, rel: str) -> bool:
        memory_file = self.workspace.classify(rel)
        if memory_file is None:
            return False
        return self.include_sessions or memory_file.kind is not FileKind.SESSION

    def changes(self, repo: Repo) -> list[tuple[str, str]]:
        """(repository path, workspace path) of memory files that differ from HEAD (ignored excluded)."""
        return [(repo_path, rel) for repo_path, rel, _ in self._status(repo)]

    def _status(self, repo: Repo) -> list[tuple[str, str, str]]:
        """(repository path, workspace path, porcelain XY status) of the memory files that differ from
        HEAD. Pathspecs are from the repository's top (``top``): git runs in the workspace, which may be a
        folder of a larger repository (relative ones named ``notes/notes/MEMORY.md`` there)."""
        root = repo.root.resolve()
        ws_root = self.workspace.root.resolve()
        prefix = ws_root.relative_to(root).as_posix() if ws_root != root else ""
        specs = [_top_spec(f"{prefix}/{t}" if prefix else t) for t in self._tops()]
        out = repo.run(
            "status",
            "--porcelain",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=all",
            "--",
            *specs,
            what="status",
        )
        found = []
        for entry in filter(None, out.split("\0")):
            repo_path = entry[3:]  # (porcelain paths are from the repository's top)
            rel = repo_path[len(prefix) + 1 :] if prefix else repo_path
            if self._is_memory(rel):
                found.append((repo_path, rel, entry[:2]))
        return sorted(found)

    def commit(
        self, *, message: str | None = None, force: bool = False, init_repo: bool = False
    ) -> CommitResult:
        repo = open_repo(self.workspace.root, init_repo=init_repo)
        _refuse_mid_operation(repo)
        status = self._status(repo)
        paths = [(repo_path, rel) for repo_path, rel, _ in status]
        if not paths:
            raise VcsError("nothing to commit: memory files match the last commit")
        head = repo.head()
        files: list[FileChange] = []
        secrets: list[tuple[str, int, str]] = []
        for repo_path, rel in paths:
            disk = self.workspace.root / rel
            new = disk.read_text(encoding="utf-8", errors="replace") if disk.is_file() else None
            if new is not None and not force:
                secrets += [(rel, f.line + 1, f.rule_id) for f in scan_text(new)]
            files.append(describe(_blob_text(repo, head, repo_path), new, rel))
        if secrets:
            raise SecretsInCommit(secrets)
        text = summary(files, message)
        specs = [_top_spec(p) for p, _ in paths]
        # A deletion or rename already staged (`git rm`, `git mv`): in neither the index nor the folder,
        # `git add` would fail on it; the commit takes it as it is.
        to_add = [_top_spec(p) for p, _, xy in status if xy != "D "]
        if to_add:
            repo.run("add", "-A", "--", *to_add, what="add")
        repo.run("commit", "-q", "--no-verify", "-m", text, "--only", "--", *specs, what="commit")
        return CommitResult(repo.head() or "", text, files)

    def history(self, rel: str, line: int | None = None, max_count: int = 50) -> list[HistoryEntry]:
        repo = open_repo(self.workspace.root)
        root = repo.root.resolve()
        repo_path = (self.workspace.root / rel).resolve().relative_to(root).as_posix()
        fmt = "--format=%x1e%H%x1f%aI%x1f%an%x1f%s"
        safe = ("--no-textconv", "--no-ext-diff", "--no-show-signature", fmt, f"--max-count={max_count}")
        # git runs in the workspace: paths relative to it (the workspace may be a folder of the repository)
        rel_path = (self.workspace.root / rel).resolve().relative_to(self.workspace.root.resolve()).as_posix()
        if line is None:
            out = repo.run("log", *safe, "--follow", "--", _top_spec(repo_path), what="log")
        else:
            out = repo.run("log", *safe, f"-L{line},{line}:{rel_path}", what="log")
        entries = []
        for record in out.split("\x1e")[1:]:
            sha, date, author, subject = record.split("\n", 1)[0].split("\x1f")
            entries.append(HistoryEntry(sha, date, author, subject))
        return entries


def _top_spec(repo_path: str) -> str:
    """A pathspec for one repository path, from the repository's top, taken literally."""
    return f":(top,literal){repo_path}"


_IN_PROGRESS = {
    "MERGE_HEAD": "a merge",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase or git am",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
}


def _refuse_mid_operation(repo: Repo) -> None:
    """Commit nothing, and stage nothing, while a merge, rebase, cherry-pick or revert is under way or a
    conflict is unresolved: staging would mark the conflict resolved with its markers in, and a commit
    in the middle of a rebase would put them in its history."""
    for name, what in _IN_PROGRESS.items():
        if (repo.paths.git_dir / name).exists():
            raise VcsError(
                f"{what} is in progress in {repo.root}: finish or abort it first (mnemo commits nothing)"
            )
    if repo.run("ls-files", "--unmerged", "-z", what="ls-files").strip("\0"):
        raise VcsError(
            f"the repository at {repo.root} has unresolved conflicts: resolve them first (mnemo commits nothing)"
        )


def _blob_text(repo: Repo, head: str | None, repo_path: str) -> str | None:
    if head is None:
        return None
    done = repo.git.run(["cat-file", "blob", f"{head}:{repo_path}"], check=False)
    return done.stdout.decode("utf-8", errors="replace") if done.returncode == 0 else None


@dataclass(frozen=True)
class BlameLine:
    sha: str
    date: str  # ISO 8601, or "" for lines not committed yet
    author: str
    summary: str
    error: str = ""
    """Why there is no blame (the repository was refused); the hover shows it."""


class BlameCache:
    """``git blame --porcelain`` of whole files, cached per (file, mtime, HEAD)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[tuple[str, float, str], list[BlameLine | None]] = {}
        self._git = InertGit(root)

    def line(self, rel: str, line: int) -> BlameLine | None:
        """Who last changed 1-based ``line`` of ``rel``; None outside a repository or untracked; a line
        with only ``error`` set when the repository's config was refused."""
        try:
            repo = checked_repo(self._git)
            if repo is None:
                return None
            head = repo.head() or ""
            path = self.root / rel
            key = (rel, path.stat().st_mtime, head)
        except UnsafeRepositoryError as exc:
            return BlameLine("", "", "", "", error=str(exc))
        except (VcsError, OSError, ValueError):
            return None
        lines = self._cache.get(key)
        if lines is None:
            done = repo.git.run(["blame", "--porcelain", "--no-textconv", "--", str(path)], check=False)
            out = done.stdout.decode("utf-8", "replace") if done.returncode == 0 else ""
            lines = parse_porcelain(out) if out else []
            self._cache = {k: v for k, v in self._cache.items() if k[0] != rel}
            self._cache[key] = lines
        return lines[line - 1] if 0 < line <= len(lines) else None


def parse_porcelain(out: str) -> list[BlameLine | None]:
    from datetime import datetime

    commits: dict[str, dict[str, str]] = {}
    result: list[BlameLine | None] = []
    current: dict[str, str] = {}
    sha = ""
    for raw in out.split("\n"):
        if raw.startswith("\t"):
            info = commits.setdefault(sha, current)
            when = ""
            if not set(sha) <= {"0"} and "author-time" in info:
                # The user's local time, as daily notes are named by the local day: in UTC, a fact
                # committed on a local evening west of Greenwich passed for a day newer than it is.
                when = datetime.fromtimestamp(int(info["author-time"]), UTC).astimezone().isoformat()
            result.append(BlameLine(sha, when, info.get("author", ""), info.get("summary", "")))
            continue
        head, _, rest = raw.partition(" ")
        if len(head) == 40 and rest and rest.split(" ")[0].isdigit():
            sha = head
            current = commits.setdefault(sha, {})
        elif head:
            current[head] = rest
    return result

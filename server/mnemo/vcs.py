"""Git for memory: commit memory files only, with a message saying what changed; file and line history.

A commit stages MEMORY.md, ``memory/`` and ``skills/`` (``sessions/`` only when asked), never the index
folder, hidden or ignored paths, and nothing else the user may have staged. It refuses while a file to
be committed holds a secret (unless forced). A workspace outside any repository gets one only when the
caller says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

import git

from mnemo.errors import MnemoError
from mnemo.secrets import scan_text
from mnemo.workspace.layout import FileKind, Workspace


class VcsError(MnemoError):
    """Git could not do what was asked (no repository, nothing to commit, git failed)."""


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "commit": self.sha,
            "message": self.message,
            "files": [{"path": f.path, "status": f.status} for f in self.files],
        }


@dataclass(frozen=True)
class HistoryEntry:
    sha: str
    date: str  # ISO 8601
    author: str
    subject: str

    def as_dict(self) -> dict[str, str]:
        return {"commit": self.sha, "date": self.date, "author": self.author, "subject": self.subject}


def open_repo(root: Path, *, init_repo: bool = False) -> git.Repo:
    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        if not init_repo:
            raise VcsError(
                f"{root} is not in a Git repository; confirm creating one (mnemo commit --init, "
                "or initRepo: true)"
            ) from None
        return git.Repo.init(root)


_HEADING = re.compile(r" {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def sections(text: str) -> dict[str, str]:
    """Heading path (``## A > ### B`` style, marks included) -> the section's own body text."""
    out: dict[str, list[str]] = {}
    stack: list[tuple[int, str]] = []
    current = ""
    fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fence = not fence
        m = None if fence else _HEADING.match(line)
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
        return ["MEMORY.md", "memory.md", "memory", "skills"] + (
            ["sessions"] if self.include_sessions else []
        )

    def _is_memory(self, rel: str) -> bool:
        memory_file = self.workspace.classify(rel)
        if memory_file is None:
            return False
        return self.include_sessions or memory_file.kind is not FileKind.SESSION

    def changes(self, repo: git.Repo) -> list[tuple[str, str]]:
        """(repository path, workspace path) of memory files that differ from HEAD (ignored excluded)."""
        root = Path(repo.working_tree_dir or self.workspace.root).resolve()
        prefix = self.workspace.root.relative_to(root).as_posix() if self.workspace.root != root else ""
        specs = [f"{prefix}/{t}" if prefix else t for t in self._tops()]
        out = repo.git.status("--porcelain", "-z", "--untracked-files=all", "--no-renames", "--", *specs)
        found = []
        for entry in filter(None, out.split("\0")):
            repo_path = entry[3:]
            rel = repo_path[len(prefix) + 1 :] if prefix else repo_path
            if self._is_memory(rel):
                found.append((repo_path, rel))
        return sorted(found)

    def commit(
        self, *, message: str | None = None, force: bool = False, init_repo: bool = False
    ) -> CommitResult:
        repo = open_repo(self.workspace.root, init_repo=init_repo)
        paths = self.changes(repo)
        if not paths:
            raise VcsError("nothing to commit: memory files match the last commit")
        head = None if not repo.head.is_valid() else repo.head.commit
        files: list[FileChange] = []
        secrets: list[tuple[str, int, str]] = []
        for repo_path, rel in paths:
            disk = self.workspace.root / rel
            new = disk.read_text(encoding="utf-8", errors="replace") if disk.is_file() else None
            if new is not None and not force:
                secrets += [(rel, f.line + 1, f.rule_id) for f in scan_text(new)]
            files.append(describe(_blob_text(head, repo_path), new, rel))
        if secrets:
            raise SecretsInCommit(secrets)
        text = summary(files, message)
        specs = [p for p, _ in paths]
        try:
            repo.git.add("-A", "--", *specs)
            repo.git.commit("-m", text, "--only", "--", *specs)
        except git.GitCommandError as exc:
            raise VcsError(f"git commit failed: {(exc.stderr or str(exc)).strip()}") from exc
        return CommitResult(repo.head.commit.hexsha, text, files)

    def history(self, rel: str, line: int | None = None, max_count: int = 50) -> list[HistoryEntry]:
        repo = open_repo(self.workspace.root)
        root = Path(repo.working_tree_dir or self.workspace.root).resolve()
        repo_path = (self.workspace.root / rel).resolve().relative_to(root).as_posix()
        fmt = "--format=%x1e%H%x1f%aI%x1f%an%x1f%s"
        try:
            if line is None:
                out = repo.git.log(fmt, f"--max-count={max_count}", "--follow", "--", repo_path)
            else:
                out = repo.git.log(fmt, f"--max-count={max_count}", f"-L{line},{line}:{repo_path}")
        except git.GitCommandError as exc:
            raise VcsError(f"git log failed: {(exc.stderr or str(exc)).strip()}") from exc
        entries = []
        for record in out.split("\x1e")[1:]:
            sha, date, author, subject = record.split("\n", 1)[0].split("\x1f")
            entries.append(HistoryEntry(sha, date, author, subject))
        return entries


def _blob_text(head: git.Commit | None, repo_path: str) -> str | None:
    if head is None:
        return None
    try:
        blob = head.tree / repo_path
    except KeyError:
        return None
    data: bytes = blob.data_stream.read()
    return data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class BlameLine:
    sha: str
    date: str  # ISO 8601, or "" for lines not committed yet
    author: str
    summary: str


class BlameCache:
    """``git blame --porcelain`` of whole files, cached per (file, mtime, HEAD)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[tuple[str, float, str], list[BlameLine | None]] = {}
        self._repo: git.Repo | None = None

    def line(self, rel: str, line: int) -> BlameLine | None:
        """Who last changed 1-based ``line`` of ``rel``; None outside a repository or untracked."""
        try:
            if self._repo is None:
                self._repo = git.Repo(self.root, search_parent_directories=True)
            repo = self._repo
            head = repo.head.commit.hexsha if repo.head.is_valid() else ""
            path = self.root / rel
            key = (rel, path.stat().st_mtime, head)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError, OSError, ValueError):
            return None
        lines = self._cache.get(key)
        if lines is None:
            try:
                out = repo.git.blame("--porcelain", "--", str(path))
            except git.GitCommandError:
                lines = []
            else:
                lines = parse_porcelain(out)
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
                when = datetime.fromtimestamp(int(info["author-time"]), UTC).isoformat()
            result.append(BlameLine(sha, when, info.get("author", ""), info.get("summary", "")))
            continue
        head, _, rest = raw.partition(" ")
        if len(head) == 40 and rest and rest.split(" ")[0].isdigit():
            sha = head
            current = commits.setdefault(sha, {})
        elif head:
            current[head] = rest
    return result

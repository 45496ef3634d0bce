"""Shared fixtures: a temporary memory workspace builder and index consistency helpers."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# The default chat provider ("auto") probes loopback ports for a running model server; a CI machine with
# something on 8080 must not change what the tests talk to. Tests of the probe set their own ports.
os.environ.setdefault("MNEMO_AGENT_AUTO_PORTS", "")

WorkspaceBuilder = Callable[..., Path]

MODEL_TEST_TIMEOUT_S = 600
"""Per-test limit for tests marked ``model`` (loading and running a real model on 2 busy cores); every
other test gets pyproject's ``timeout`` (pytest-timeout), so a hang fails with the test's name."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("model") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(MODEL_TEST_TIMEOUT_S))


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def settle(root: Path, seconds: float = 60.0) -> None:
    """Move every file's mtime ``seconds`` into the past, as notes written before the index are: a file
    read within two seconds of its mtime is compared by content at each sync (mnemo.index.racy)."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds))


def record_classified(workspace: Any) -> list[str]:
    """The paths a :class:`mnemo.workspace.layout.Workspace` is asked to classify from now on (a sync
    classifies a file only when it reads it)."""
    asked: list[str] = []
    classify = workspace.classify

    def recorded(rel_path: str) -> Any:
        asked.append(rel_path)
        return classify(rel_path)

    workspace.classify = recorded
    return asked


def markdown_hashes(root: Path) -> dict[str, str]:
    """sha256 of every .md file under ``root`` (to prove indexing never writes Markdown)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.md"))
        if p.is_file() and not p.is_symlink()
    }


def check_consistent(con) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Assert the invariants of an index and return its counts.

    Every chunk's path is a file row, no file row is duplicated, each file's chunk count matches, and
    the fts tables hold exactly the chunks (one docs row per chunk, stats agree).
    """
    files = con.execute("SELECT path, chunks FROM files").fetchall()
    paths = [p for p, _ in files]
    assert len(paths) == len(set(paths)), "duplicate file rows"
    orphans = con.execute("SELECT count(*) FROM chunks WHERE path NOT IN (SELECT path FROM files)").fetchone()
    assert orphans == (0,), "chunks whose file is not in files"
    per_file = dict(con.execute("SELECT path, count(*) FROM chunks GROUP BY path").fetchall())
    for path, n in files:
        assert per_file.get(path, 0) == n, f"{path}: files.chunks={n} but {per_file.get(path, 0)} chunk rows"
    chunk_ids = {r[0] for r in con.execute("SELECT id FROM chunks").fetchall()}
    doc_ids = [r[0] for r in con.execute("SELECT name FROM fts_main_chunks.docs").fetchall()]
    assert len(doc_ids) == len(set(doc_ids)), "duplicate fts docs"
    assert set(doc_ids) == chunk_ids, "fts docs differ from chunks"
    (num_docs,) = con.execute("SELECT num_docs FROM fts_main_chunks.stats").fetchone()
    assert num_docs == len(chunk_ids)
    # Each chunk's postings count its terms (docs.len) and carry that length; each df counts postings.
    (bad_postings,) = con.execute(
        "SELECT count(*) FROM fts_main_chunks.docs d FULL JOIN (SELECT name, sum(tf) AS n, min(len) AS lo, "
        "max(len) AS hi FROM fts_main_chunks.postings GROUP BY name) p ON p.name = d.name "
        "WHERE coalesce(p.n, 0) <> coalesce(d.len, -1) OR (p.name IS NOT NULL AND (p.lo <> d.len OR p.hi <> d.len))"
    ).fetchone()
    assert bad_postings == 0, "fts postings differ from the docs' lengths"
    (bad_df,) = con.execute(
        "SELECT count(*) FROM fts_main_chunks.dict k LEFT JOIN (SELECT termid, count(*) AS n "
        "FROM fts_main_chunks.postings GROUP BY termid) p ON p.termid = k.termid WHERE coalesce(p.n, 0) <> k.df"
    ).fetchone()
    assert bad_df == 0, "fts document frequencies differ from the postings"
    return {"files": len(paths), "chunks": len(chunk_ids)}


@pytest.fixture
def make_workspace(tmp_path: Path) -> WorkspaceBuilder:
    """Build a workspace from ``{relative path: text or bytes}``; returns its root.

    ``toml`` (keyword) is written as ``mnemo.toml``. Each call makes a new folder.
    """
    counter = iter(range(1_000_000))

    def build(files: dict[str, str | bytes] | None = None, *, toml: str | None = None) -> Path:
        root = tmp_path / f"ws{next(counter)}"
        root.mkdir()
        write_files(root, files or {})
        if toml is not None:
            (root / "mnemo.toml").write_text(toml, encoding="utf-8")
        return root

    return build


@pytest.fixture
def services_factory() -> Iterator[Callable[..., object]]:
    """``build_services`` that closes whatever it built at the end of the test."""
    from mnemo.services import build_services

    built: list[object] = []

    def make(root: Path, provider: str = "none"):  # type: ignore[no-untyped-def]
        services = build_services(root, provider=provider)
        built.append(services)
        return services

    yield make
    for services in reversed(built):
        with contextlib.suppress(Exception):
            services.close()  # type: ignore[attr-defined]


SAMPLE_NOTES: dict[str, str | bytes] = {
    "MEMORY.md": (
        "# Memory\n\n## Preferences\n- Prefer small pull requests.\n- Coffee: dark roast, no sugar.\n\n"
        "## Decisions\n- The billing service uses PostgreSQL with row-level security.\n"
    ),
    "memory/2026-11-02.md": (
        "# 2026-11-02\n\n## Meetings\n- Architecture review with Alice about the billing database.\n"
        "- 下周完成 API 设计评审，服务器集群部署在法兰克福机房。\n\n"
        "## Lessons\n- The staging deploy failed because the migration ran before the config was loaded.\n"
    ),
    "memory/gardening.md": (
        "# Gardening\n\nTomatoes need full sun and regular watering; prune the suckers weekly.\n"
        "Basil grows well next to tomatoes.\n"
    ),
    "memory/中文笔记.md": "# 数据库迁移\n\n我们决定把订单系统迁移到新的数据库集群，明年一月完成。\n",
    "skills/deploy/SKILL.md": (
        "---\nname: deploy\ndescription: Deploy the app to staging\n---\n# Deploy\n\nRun make deploy.\n"
    ),
}


@pytest.fixture
def sample_workspace(make_workspace: WorkspaceBuilder) -> Path:
    return make_workspace(SAMPLE_NOTES)


@pytest.fixture
def md_hashes() -> Callable[[Path], dict[str, str]]:
    return markdown_hashes


@pytest.fixture
def consistent() -> Callable[..., dict[str, int]]:
    return check_consistent


@pytest.fixture(scope="session")
def sample_notes() -> dict[str, str | bytes]:
    return dict(SAMPLE_NOTES)


@pytest.fixture(scope="session")
def write_tree() -> Callable[[Path, dict[str, str | bytes]], None]:
    return write_files


class HashEmbedder:
    """A deterministic stand-in for a model: a bag of hashed terms, L2-normalised. Counts its calls."""

    provider = "fake"

    def __init__(self, dims: int = 16, model: str = "hash-v1") -> None:
        self._dims = dims
        self.model = model
        self.embedded: list[str] = []

    @property
    def dims(self) -> int:
        return self._dims

    @property
    def max_tokens(self) -> int:
        return 512

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def embed(self, texts):  # type: ignore[no-untyped-def]
        import numpy as np

        from mnemo.text.terms import index_terms

        out = np.zeros((len(texts), self._dims), dtype=np.float32)
        for i, text in enumerate(texts):
            self.embedded.append(text)
            for term in index_terms(text):
                out[i, int(hashlib.md5(term.encode()).hexdigest(), 16) % self._dims] += 1.0
            out[i, 0] += 1e-3
            out[i] /= np.linalg.norm(out[i])
        return out

    def close(self) -> None:
        pass


@pytest.fixture
def hash_embedder() -> type[HashEmbedder]:
    return HashEmbedder


def local_model_services(root: Path, notes: dict[str, str | bytes]):  # type: ignore[no-untyped-def]
    """Services over ``notes`` written to ``root`` with the real local embedding model, synced (skips the
    test when llama-cpp-python is missing). For module-scoped fixtures; the caller closes them."""
    pytest.importorskip("llama_cpp")
    from mnemo.services import build_services

    write_files(root, notes)
    services = build_services(root, provider="local")
    services.memory.sync()
    return services

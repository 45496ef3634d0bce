"""Several writer processes on one PostgreSQL index: two machines indexing at once lose nothing and
duplicate nothing; a writer killed inside a transaction leaves every file old or new."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psycopg

from mnemo.config import ChunkingSettings
from mnemo.markdown.chunker import chunk_markdown
from tests.conftest import write_files
from tests.crash_writer import note_text, word
from tests.postgres.conftest import team_toml
from tests.postgres.helpers import check_pg_consistent, embedding_toml, hash_embeddings_endpoint

ROOT = Path(__file__).resolve().parents[2]
COMMON = 40
TIMEOUT_S = 120


def _env(dsn: str) -> dict[str, str]:
    return {
        **os.environ,
        "MNEMO_PG_DSN": dsn,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "server"), str(ROOT)]),
    }


def _mnemo(dsn: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mnemo", *args],
        cwd=ROOT,
        env=_env(dsn),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, err[-2000:]
    return out


def _checkout(root: Path, toml: str, own: dict[str, str]) -> Path:
    write_files(root, {f"memory/topic-{n:02d}.md": note_text(n) for n in range(COMMON)} | own)
    (root / "mnemo.toml").write_text(toml, encoding="utf-8")
    return root


def _chunks(*roots: Path) -> int:
    """How many chunks the files of these checkouts make (each path once)."""
    files = {p.relative_to(r).as_posix(): p.read_text() for r in roots for p in (r / "memory").glob("*.md")}
    settings = ChunkingSettings()
    return sum(
        len(chunk_markdown(rel, text, target_tokens=settings.target_tokens, overlap=settings.overlap))
        for rel, text in files.items()
    )


def _indexed(output: str) -> int:
    found = re.search(r"indexed (\d+) changed file", output)
    assert found, output
    return int(found.group(1))


def test_two_machines_indexing_at_once_lose_and_duplicate_nothing(
    tmp_path: Path, pg_dsn: str, namespace: str
) -> None:
    with hash_embeddings_endpoint() as url:
        toml = team_toml(namespace, embedding_toml(url))
        alice = _checkout(tmp_path / "alice", toml, {"memory/alice.md": "# Alice\n\nThe wombatqz plan.\n"})
        bob = _checkout(tmp_path / "bob", toml, {"memory/bob.md": "# Bob\n\nThe quokkaqz budget.\n"})
        writers = [_mnemo(pg_dsn, "index", "--workspace", str(root)) for root in (alice, bob)]
        outputs = [_finish(w) for w in writers]
        assert sum(_indexed(o) for o in outputs) == COMMON + 2, "each file written once, by one machine"
        assert check_pg_consistent(pg_dsn, namespace) == {"files": COMMON + 2, "chunks": _chunks(alice, bob)}
        with psycopg.connect(pg_dsn) as con:
            waiting = con.execute(
                "SELECT count(*) FROM mnemo.chunks c JOIN mnemo.generations g ON g.id = c.g "
                "WHERE g.namespace = %s AND g.live AND c.embedding IS NULL",
                [namespace],
            ).fetchone()
        assert waiting == (0,), "every chunk got its vector"
        found = _finish(_mnemo(pg_dsn, "search", "--workspace", str(alice), "--json", "quokkaqz budget"))
        result = json.loads(found)
        assert result["mode"] == "hybrid" and result["results"][0]["path"] == "memory/bob.md"


def _killed_inside(dsn: str, root: Path, stage: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.postgres.pg_writer", str(root), stage],
        cwd=ROOT,
        env=_env(dsn),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "inside"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(TIMEOUT_S)


def _chunks_with(dsn: str, namespace: str, text: str) -> int:
    with psycopg.connect(dsn) as con:
        row = con.execute(
            "SELECT count(*) FROM mnemo.chunks c JOIN mnemo.generations g ON g.id = c.g "
            "WHERE g.namespace = %s AND g.live AND c.text LIKE %s",
            [namespace, f"%{text}%"],
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_writer_killed_mid_transaction_leaves_every_file_old_or_new(
    tmp_path: Path, pg_dsn: str, namespace: str
) -> None:
    with hash_embeddings_endpoint() as url:
        root = _checkout(tmp_path / "ws", team_toml(namespace, embedding_toml(url)), {})
        _killed_inside(pg_dsn, root, "build")  # the first build, killed in its first batch
        out = _finish(_mnemo(pg_dsn, "index", "--workspace", str(root)))
        assert "(full rebuild)" in out and _indexed(out) == COMMON
        assert check_pg_consistent(pg_dsn, namespace)["files"] == COMMON, "the unfinished generation is gone"
        for n in (3, 4, 5):
            (root / "memory" / f"topic-{n:02d}.md").write_text(
                note_text(n, f"\nEdited: {word('edit', n)}.\n")
            )
        _killed_inside(pg_dsn, root, "file")  # killed inside the first changed file's transaction
        assert check_pg_consistent(pg_dsn, namespace)["files"] == COMMON
        assert sum(_chunks_with(pg_dsn, namespace, word("edit", n)) for n in (3, 4, 5)) == 0
        assert _chunks_with(pg_dsn, namespace, word("marker", 3)) == 1, "the old version is still there"
        out = _finish(_mnemo(pg_dsn, "index", "--workspace", str(root)))
        assert _indexed(out) == 3
        assert all(_chunks_with(pg_dsn, namespace, word("edit", n)) == 1 for n in (3, 4, 5))
        assert check_pg_consistent(pg_dsn, namespace)["files"] == COMMON

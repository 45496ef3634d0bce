"""Helpers for the PostgreSQL tests: an embeddings endpoint for server processes, and the index's invariants."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg

from mnemo.config import ChunkingSettings, IndexSettings
from mnemo.index.pg_indexer import PgIndexer
from mnemo.workspace.layout import Workspace
from tests.conftest import HashEmbedder, write_files

DIMS = 32


@contextmanager
def hash_embeddings_endpoint(dims: int = DIMS) -> Iterator[str]:
    """An OpenAI-compatible ``/v1/embeddings`` on loopback answering HashEmbedder vectors, so that the
    real CLI and LSP server processes search in hybrid mode without a model. Yields its base URL."""
    embedder = HashEmbedder(dims=dims)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            with lock:
                vectors = embedder.embed(list(payload["input"]))
            body = json.dumps(
                {"data": [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def embedding_toml(url: str) -> str:
    return f'[embedding]\nprovider = "openai"\nendpoint = "{url}"\nmodel = "hash"\napi_key_env = ""\n'


def _one(con: psycopg.Connection, sql: str, params: list[object]) -> Any:
    row = con.execute(sql, params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row[0]


def check_pg_consistent(dsn: str, namespace: str) -> dict[str, int]:
    """Assert the invariants of a namespace's live generation and return its counts: every chunk's file
    is indexed with that many chunks, no chunk twice, postings exactly the chunks' terms (tf summing to
    each chunk's length), document frequencies and totals equal to what the rows say."""
    with psycopg.connect(dsn, autocommit=True) as con:
        g = _one(con, "SELECT id FROM mnemo.generations WHERE namespace = %s AND live", [namespace])
        assert _one(con, "SELECT count(*) FROM mnemo.generations WHERE namespace = %s", [namespace]) == 1
        files = dict(con.execute("SELECT path, chunks FROM mnemo.files WHERE g = %s", [g]).fetchall())
        per_file = dict(
            con.execute("SELECT path, count(*) FROM mnemo.chunks WHERE g = %s GROUP BY path", [g]).fetchall()
        )
        assert set(per_file) <= set(files), "chunks whose file is not indexed"
        for path, n in files.items():
            assert per_file.get(path, 0) == n, f"{path}: files.chunks={n}, {per_file.get(path, 0)} chunk rows"
        duplicated = _one(
            con,
            "SELECT count(*) FROM (SELECT path, key, start_line FROM mnemo.chunks WHERE g = %s "
            "GROUP BY 1, 2, 3 HAVING count(*) > 1) d",
            [g],
        )
        assert duplicated == 0, "a chunk indexed twice"
        wrong_postings = _one(
            con,
            "SELECT count(*) FROM (SELECT c.id, t FROM mnemo.chunks c, unnest(tsvector_to_array(c.tsv)) t "
            "WHERE c.g = %(g)s) a FULL JOIN (SELECT chunk_id, term FROM mnemo.postings WHERE g = %(g)s) p "
            "ON p.chunk_id = a.id AND p.term = a.t WHERE p.chunk_id IS NULL OR a.id IS NULL",
            {"g": g},
        )
        assert wrong_postings == 0, "postings differ from the chunks' terms"
        bad_len = _one(
            con,
            "SELECT count(*) FROM mnemo.chunks c JOIN (SELECT chunk_id, sum(tf) AS n FROM mnemo.postings "
            "WHERE g = %s GROUP BY chunk_id) p ON p.chunk_id = c.id WHERE p.n <> c.len",
            [g],
        )
        assert bad_len == 0, "a chunk's term frequencies do not add up to its length"
        bad_df = _one(
            con,
            "SELECT count(*) FROM mnemo.terms t FULL JOIN (SELECT term, count(*) AS n FROM mnemo.postings "
            "WHERE g = %(g)s GROUP BY term) p ON p.term = t.term AND t.g = %(g)s "
            "WHERE (t.g = %(g)s OR t.g IS NULL) AND coalesce(t.df, 0) <> coalesce(p.n, 0)",
            {"g": g},
        )
        assert bad_df == 0, "document frequencies differ from the postings"
        docs, total = con.execute(
            "SELECT docs, total_len FROM mnemo.generations WHERE id = %s", [g]
        ).fetchone() or (0, 0)
        chunks, length = con.execute(
            "SELECT count(*), coalesce(sum(len), 0) FROM mnemo.chunks WHERE g = %s", [g]
        ).fetchone() or (0, 0)
        assert (docs, total) == (chunks, length), "the generation's totals differ from its chunks"
        return {"files": len(files), "chunks": int(chunks)}


def fresh_database(pg_dsn: str, name: str) -> str:
    """An empty database ``name`` in the session's cluster (dropped first if a test left one): its DSN."""
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    return pg_dsn.rsplit("/", 1)[0] + f"/{name}"


WORDS = ["deploy", "billing", "cache", "staging", "invoice", "garden", "kernel", "rollout", "ledger", "quota",
         "broker", "shard", "replica"]  # fmt: skip


def varied_notes(count: int) -> dict[str, str | bytes]:
    """``count`` notes of 30 of :data:`WORDS` each: two in three daily, the rest evergreen topics with
    front-matter dates."""
    rng = random.Random(5)
    files: dict[str, str | bytes] = {}
    first = date(2026, 1, 1)
    for i in range(count):
        words = " ".join(rng.choice(WORDS) for _ in range(30))
        if i % 3:
            files[f"memory/{first + timedelta(days=i):%Y-%m-%d}.md"] = f"# Day {i}\n\n{words}\n"
        else:
            files[f"memory/topic-{i}.md"] = (
                f"---\ndate: 2025-06-{1 + i % 28:02d}\n---\n# Topic {i}\n\n{words}\n"
            )
    return files


@contextmanager
def synced_indexer(root: Path, dsn: str, namespace: str, notes: int = 150) -> Iterator[PgIndexer]:
    """A PostgreSQL indexer over ``notes`` :func:`varied_notes` written in ``root``, synced (hash
    vectors, 16 dims); closed afterwards."""
    write_files(root, varied_notes(notes))
    built = PgIndexer(
        Workspace(root, ignore=[".mnemo"]),
        HashEmbedder(dims=16, model=f"hash@{namespace}"),
        IndexSettings(),
        ChunkingSettings(),
        dsn=dsn,
        namespace=namespace,
    )
    try:
        built.sync()
        yield built
    finally:
        built.close()

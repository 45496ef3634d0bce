"""Side-by-side benchmark: mnemo against OpenClaw's memory search and QMD, same corpora, same model, one run.

Installs the peers from the npm registry into ~/.cache/mnemo-peers (Node 24.22.3, openclaw@2026.9.6,
@tobilu/qmd@2.8.3; idempotent), writes every corpus into a fresh folder per system under --workdir, and
measures for each system: full index time and peak RSS (CLI), index size, no-op re-index (CLI and in-process),
edit-one-file -> searchable (CLI, in-process, and mnemo's LSP route), search p50/p95 in-process and end to
end (CLI; mnemo also over LSP), and Recall@5 / MRR@10 / nDCG@10 of the in-process rankings.

Corpora (given as separate words): en:N / zh:N = benchmarks/synthetic.py workspaces of N files (needle
queries scored); msmarco / cmrc = the BEIR sets in --data-dir, optionally cut: msmarco:docs=300 keeps the
first 300 passages by file name and the queries with an answer among them, cmrc:queries=300 keeps 300
queries. Keyword mode: BM25 only (mnemo provider none; OpenClaw provider none; QMD search). Hybrid mode:
all-MiniLM-L6-v2 as mnemo's GGUF file for all three (OpenClaw through a loopback llama_cpp.server; QMD by
path, `qmd query --no-rerank` with lex/vec lines). Embedding runs at a few chunks/s on 2 cores: keep hybrid
corpora small.

    make bench-peers       # the defaults below (~40 min on 2 cores)
    make bench-peers PEERS_ARGS="--keyword en:100 --hybrid"   # options pass through PEERS_ARGS
    python benchmarks/peers/run.py --keyword en:1000 zh:1000 en:10000 zh:10000 msmarco cmrc \\
        --hybrid en:100 zh:100 msmarco:docs=300 cmrc:docs=200,queries=150   # full set (hours)
    python benchmarks/peers/run.py --keyword en:100 --hybrid --systems mnemo,qmd --no-docs   # quick look

Figures: benchmarks/out/peers.{json,md}, and the table between the bench-peers markers in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import OUT, command_line, machine, machine_line, write_outputs
from benchmarks.peers import install
from benchmarks.peers.corpora import Corpus, load
from benchmarks.peers.measure import measure
from benchmarks.peers.peer_systems import OpenClaw, Qmd
from benchmarks.peers.report import render, score, write_docs
from benchmarks.peers.systems import ROOT, Mnemo, System

KEYWORD = ["en:1000", "zh:1000", "msmarco", "cmrc:queries=300"]
HYBRID = ["en:100", "zh:100", "msmarco:docs=300", "cmrc:docs=200,queries=100"]


class EmbedServer:
    """llama-cpp-python's OpenAI-compatible server over the GGUF file, on a loopback port (for OpenClaw)."""

    def __init__(self, model: Path, threads: int) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        args = ["--model", str(model), "--embedding", "true", "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["--n_ctx", "512", "--n_batch", "512", "--n_ubatch", "512", "--n_threads", str(threads)]
        args += ["--model_alias", "local-gguf"]
        self.log = open(Path("/tmp") / f"mnemo-peers-embed-{self.port}.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", *args], stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + "/models", timeout=2).read()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.5)
        self.close()
        raise RuntimeError(f"embedding server did not start (log: {self.log.name})")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        self.log.close()


def versions(peers: install.Peers | None) -> str:
    from importlib.metadata import version

    parts = [
        f"mnemo {version('mnemo')}",
        f"DuckDB {version('duckdb')}",
        f"llama-cpp-python {version('llama_cpp_python')}",
    ]
    if peers:
        parts += [
            f"Node {install.NODE_VERSION}",
            f"OpenClaw {install.OPENCLAW_VERSION}",
            f"QMD {install.QMD_VERSION}",
        ]
    return ", ".join(parts) + ", all-MiniLM-L6-v2 (F16 GGUF converted by mnemo)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--keyword", nargs="*", default=KEYWORD, help=f"corpora in keyword mode (default {' '.join(KEYWORD)})"
    )
    p.add_argument(
        "--hybrid", nargs="*", default=HYBRID, help=f"corpora in hybrid mode (default {' '.join(HYBRID)})"
    )
    p.add_argument(
        "--systems", default="mnemo,openclaw,qmd", help="which systems (default mnemo,openclaw,qmd)"
    )
    p.add_argument("--edits", type=int, default=3, help="edits timed per route (median; default 3)")
    p.add_argument("--cli-queries", type=int, default=5, help="searches timed through each CLI (default 5)")
    p.add_argument("--lsp-queries", type=int, default=30, help="searches timed over mnemo's LSP (default 30)")
    p.add_argument(
        "--latency-queries", type=int, default=60, help="synthetic sets: pad queries to this many (60)"
    )
    p.add_argument(
        "--openclaw-tokenizer",
        default="trigram",
        help="OpenClaw FTS tokenizer (default trigram; unicode61, its default, finds no Chinese)",
    )
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="embedding server threads")
    p.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data", help="BEIR sets folder")
    p.add_argument(
        "--workdir", type=Path, default=Path("/tmp/mnemo-peers"), help="where workspaces are built"
    )
    p.add_argument(
        "--cache", type=Path, default=None, help="peer install cache (default ~/.cache/mnemo-peers)"
    )
    p.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the rows of benchmarks/out/peers.json and replace only the (system, corpus, mode) measured now",
    )
    p.add_argument(
        "--render",
        action="store_true",
        help="measure nothing: re-render the tables from benchmarks/out/peers.json (and the docs block)",
    )
    args = p.parse_args(argv)
    if args.render:
        data = json.loads((OUT / "peers.json").read_text(encoding="utf-8"))
        saved = {k: v for k, v in data.items() if k != "results"}
        md = render(data["results"], saved)
        write_outputs("peers", data, md)
        if not args.no_docs:
            write_docs(ROOT / "docs" / "benchmarks.md", md)
        return 0

    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    peers = install.ensure(args.cache) if set(systems) - {"mnemo"} else None
    m = machine()
    meta: dict[str, Any] = {
        "command": command_line().replace("python benchmarks/run.py", "python benchmarks/peers/run.py"),
        "machine": m,
        "machine_line": machine_line(m),
        "versions": versions(peers),
        "corpora": {},
    }
    results: list[dict[str, Any]] = []
    if args.merge and (OUT / "peers.json").is_file():
        saved = json.loads((OUT / "peers.json").read_text(encoding="utf-8"))
        results = saved["results"]
        meta["corpora"] = saved.get("corpora", {})
        if peers is None:  # a mnemo-only re-run keeps the peers' versions of the saved rows
            meta["versions"] = saved["versions"]
        meta["command"] = f"{saved['command']}` then `{meta['command']}"
        meta["machine_line"] = (
            f"{saved['machine_line']} Re-measured rows ({args.systems}): load average at start "
            f"{m['loadavg'][0]:.2f}, commit {m['commit']}, {m['date']}."
        )
    plan = [("keyword", c) for c in args.keyword] + [("hybrid", c) for c in args.hybrid]
    model: Path | None = None
    server: EmbedServer | None = None
    try:
        for mode, spec in plan:
            corpus = load(spec, args.data_dir, args.latency_queries)
            meta["corpora"][corpus.name] = {"files": len(corpus.files), "scored": len(corpus.scored)}
            if mode == "hybrid" and model is None:
                from mnemo.embeddings.base import default_cache_dir
                from mnemo.embeddings.gguf_convert import ensure_default_gguf

                model = ensure_default_gguf(default_cache_dir(None) / "models")[0]
            if mode == "hybrid" and server is None and "openclaw" in systems and model is not None:
                server = EmbedServer(model, args.threads)
            for name in systems:
                sys_ = make(name, args, corpus, mode, peers, model, server)
                res = measure(sys_, args.edits, args.cli_queries, args.lsp_queries)
                res["loadavg_after"] = round(os.getloadavg()[0], 2)
                score(res, corpus)
                key = (res["system"], res["corpus"], res["mode"])
                results = [r for r in results if (r["system"], r["corpus"], r["mode"]) != key]
                print("  " + json.dumps({k: v for k, v in res.items() if k != "ranked"}), file=sys.stderr)
                results.append(res)
                md = render(results, meta)
                write_outputs("peers", {**meta, "results": results}, md)
                if not args.no_docs:
                    write_docs(ROOT / "docs" / "benchmarks.md", md)
    finally:
        if server:
            server.close()
    return 0


def make(
    name: str,
    args: argparse.Namespace,
    corpus: Corpus,
    mode: str,
    peers: install.Peers | None,
    model: Path | None,
    server: EmbedServer | None,
) -> System:
    root = args.workdir / f"{corpus.name}-{mode}" / name
    if name == "mnemo":
        return Mnemo(root, corpus, mode)
    assert peers is not None
    if name == "openclaw":
        url = server.url if server else ""
        return OpenClaw(root, corpus, mode, peers, embed_url=url, tokenizer=args.openclaw_tokenizer)
    if name == "qmd":
        return Qmd(root, corpus, mode, peers, model=str(model or ""))
    raise SystemExit(f"unknown system {name!r} (mnemo, openclaw, qmd)")


if __name__ == "__main__":
    raise SystemExit(main())

"""Engine benchmark: indexing, incremental re-indexing, search latency, memory and disk on synthetic workspaces.

For every (language, size, provider) a workspace is generated (benchmarks/synthetic.py) and measured in its own
child process, so peak RSS (``ru_maxrss``) is per run:

- cold index: a full ``MemoryService.sync()`` of a fresh workspace; chunks/s over all chunks;
- raw embedding (provider local): ``embedder.embed([text])`` one text at a time on a deterministic sample of
  the same embedding inputs the indexer built (``--raw-sample``), and the indexing overhead over the raw
  embedding time those chunks would take: ``index_s / (chunks_embedded / raw_rate) - 1``;
- edit -> searchable: one paragraph of one file replaced by new text, timed from the change to a search that
  returns the new text, both through the editor path (``schedule_buffer`` + ``search``) and from disk (write
  the file + ``sync()`` + ``search``); median of ``--edits`` edits;
- no-op re-index: ``sync()`` with nothing changed;
- search latency p50/p95 over ``--queries`` queries (the needle queries plus generated ones; in local mode this
  includes embedding the query), and the needle sanity check (Hit@5);
- peak RSS of the child process and the size of the index folder on disk.

    python benchmarks/bench_engine.py --sizes 100,1000,10000 --lang en,zh --provider none
    python benchmarks/bench_engine.py --sizes 100,1000 --lang en,zh --provider local
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import command_line, machine, machine_line, md_table, percentile, write_outputs  # noqa: E402

EDIT_MARKERS = {
    "en": [
        "zorblax quintessence {k} aurora",
        "marmalade trebuchet {k} saffron",
        "quokka lighthouse {k} vermilion",
    ],
    "zh": ["紫檀书架第{k}号放在阁楼", "琉璃风铃第{k}个挂在窗前", "青铜罗盘第{k}枚收在木箱"],
}
QUERY_WORDS = {
    "en": [
        "billing migration",
        "flaky test suite",
        "rollout checkout",
        "payments endpoint",
        "legacy cache",
        "search index",
        "quarterly budget",
        "incident runbook",
        "scheduler config",
        "gateway alert",
        "rolled back the deploy",
        "design doc review",
        "analytics pipeline",
        "notifications backlog",
    ],
    "zh": [
        "支付系统数据库",
        "搜索服务索引",
        "用户中心接口",
        "数据平台日志",
        "订单服务配置",
        "监控平台指标",
        "推荐系统模型",
        "会员系统预算",
        "消息队列测试",
        "报表系统文档",
        "客服系统需求",
        "部署方案",
    ],
}


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def child(args: argparse.Namespace) -> int:
    """Measure one workspace (already written by the parent); print one JSON object."""
    from mnemo.index.file_rows import embedding_input
    from mnemo.markdown.chunker import chunk_markdown
    from mnemo.services import build_services

    ws = Path(args.child)
    meta = json.loads((ws.parent / (ws.name + ".needles.json")).read_text(encoding="utf-8"))
    lang, provider = meta["lang"], args.provider
    res: dict[str, object] = {"lang": lang, "files": meta["files"], "provider": provider}
    services = build_services(ws, provider=provider)
    memory = services.memory
    try:
        if provider == "local":
            t = time.perf_counter()
            _ = (
                memory.embedder.dims
            )  # load the model outside the timed index (initialize is measured elsewhere)
            res["model_load_s"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        report = memory.sync()
        res["cold_index_s"] = time.perf_counter() - t
        status = memory.status()
        res["chunks"] = status.chunks
        res["chunks_embedded"] = report.chunks_embedded
        res["chunks_per_s"] = status.chunks / res["cold_index_s"]
        res["index_mb"] = dir_size(ws / ".mnemo") / 1e6

        if provider == "local":
            texts: list[str] = []
            for rel in sorted(meta["paths"]):
                body = (ws / rel).read_text(encoding="utf-8")
                texts += [
                    embedding_input(c) for c in chunk_markdown(rel, body, target_tokens=256, overlap=0.2)
                ]
            sample = random.Random(1).sample(texts, min(len(texts), args.raw_sample))
            t = time.perf_counter()
            for text in sample:
                memory.embedder.embed([text])
            raw_s = time.perf_counter() - t
            raw_rate = len(sample) / raw_s
            res["raw_sample"] = len(sample)
            res["raw_embed_per_s"] = raw_rate
            est_raw = report.chunks_embedded / raw_rate
            res["raw_embed_est_s"] = est_raw
            res["overhead_pct"] = (res["cold_index_s"] / est_raw - 1) * 100 if est_raw else float("nan")

        # no-op re-index
        noop = []
        for _ in range(3):
            t = time.perf_counter()
            memory.sync()
            noop.append(time.perf_counter() - t)
        res["noop_s"] = statistics.median(noop)

        # edit one paragraph -> searchable
        needle_paths = {n["path"] for n in meta["needles"]}
        candidates = [p for p in sorted(meta["paths"]) if p not in needle_paths and p != "MEMORY.md"]
        rng = random.Random(3)
        buffer_ms, disk_ms, edit_ok = [], [], []
        for k in range(args.edits):
            for how in ("buffer", "disk"):
                rel = rng.choice(candidates)
                lines = (ws / rel).read_text(encoding="utf-8").splitlines()
                prose = [
                    i for i, line in enumerate(lines) if line and line[0] not in "#-`" and len(line) > 40
                ]
                if not prose:
                    continue
                marker = EDIT_MARKERS[lang][k % len(EDIT_MARKERS[lang])].format(k=f"{how}{k}")
                at = rng.choice(prose)
                lines[at] = marker + (". " if lang == "en" else "。") + "Edited paragraph."
                text = "\n".join(lines) + "\n"
                t = time.perf_counter()
                if how == "buffer":
                    memory.schedule_buffer(rel, text)
                else:
                    (ws / rel).write_text(text, encoding="utf-8")
                    memory.sync()
                out = memory.search(marker, max_results=6, min_score=0.0)
                elapsed = (time.perf_counter() - t) * 1000
                ok = any(h.path == rel and h.start_line <= at + 1 <= h.end_line for h in out.results)
                edit_ok.append(ok)
                (buffer_ms if how == "buffer" else disk_ms).append(elapsed)
        res["edit_buffer_ms"] = statistics.median(buffer_ms) if buffer_ms else float("nan")
        res["edit_disk_ms"] = statistics.median(disk_ms) if disk_ms else float("nan")
        res["edit_found"] = f"{sum(edit_ok)}/{len(edit_ok)}"

        # search latency and needle sanity check
        qrng = random.Random(5)
        queries = [(n["query"], n["path"]) for n in meta["needles"]]
        while len(queries) < args.queries:
            a, b = qrng.sample(QUERY_WORDS[lang], 2)
            queries.append((f"{a} {b}" if lang == "en" else a + b, ""))
        memory.search(queries[0][0])  # warm-up (first query compiles statements)
        lat, hits = [], 0
        for q, want in queries:
            t = time.perf_counter()
            out = memory.search(q, max_results=6)
            lat.append((time.perf_counter() - t) * 1000)
            if want and any(h.path == want for h in out.results[:5]):
                hits += 1
        res["search_queries"] = len(queries)
        res["search_p50_ms"] = percentile(lat, 50)
        res["search_p95_ms"] = percentile(lat, 95)
        res["needle_hit5"] = f"{hits}/{len(meta['needles'])}"
    finally:
        services.close()
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(res))
    return 0


def run_one(lang: str, size: int, provider: str, args: argparse.Namespace) -> dict[str, object]:
    from benchmarks.synthetic import generate

    ws = Path(args.workdir) / f"{lang}-{size}-{provider}"
    if ws.exists():
        shutil.rmtree(ws)
    ws.mkdir(parents=True)
    spec = generate(size, lang, args.seed, write_to=ws)
    if args.threads:
        (ws / "mnemo.toml").write_text(f"[embedding]\nthreads = {args.threads}\n", encoding="utf-8")
    meta = {
        "lang": lang,
        "files": size,
        "paths": sorted(spec.files),
        "needles": [{"path": n.path, "query": n.query} for n in spec.needles],
    }
    (ws.parent / (ws.name + ".needles.json")).write_text(
        json.dumps(meta, ensure_ascii=False), encoding="utf-8"
    )
    del spec
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(ws),
        "--provider",
        provider,
        "--raw-sample",
        str(args.raw_sample),
        "--edits",
        str(args.edits),
        "--queries",
        str(args.queries),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-4000:])
    return {"lang": lang, "files": size, "provider": provider, "error": f"exit {proc.returncode}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="100,1000,10000", help="workspace sizes in files (default 100,1000,10000)"
    )
    parser.add_argument("--lang", default="en,zh", help="en, zh or both (default en,zh)")
    parser.add_argument("--provider", default="none", help="none, local or none,local (default none)")
    parser.add_argument(
        "--local-max-files",
        type=int,
        default=1000,
        help="skip provider local above this size (default 1000: local embedding runs at ~4-15 chunks/s here)",
    )
    parser.add_argument(
        "--raw-sample", type=int, default=300, help="chunks timed for raw embedding (default 300)"
    )
    parser.add_argument("--edits", type=int, default=3, help="edits timed per path (median; default 3)")
    parser.add_argument("--queries", type=int, default=120, help="search queries timed (default 120)")
    parser.add_argument("--threads", type=int, default=0, help="embedding threads (0: all cores)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per run before it is abandoned")
    parser.add_argument("--workdir", default="/tmp/mnemo-bench/engine", help="where workspaces are built")
    parser.add_argument("--name", default="", help="output name (default engine-<provider>)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument(
        "--from-log",
        type=Path,
        help="only re-render the table from the per-run JSON lines of a log of this script",
    )
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    if args.from_log:
        rows = [json.loads(x[2:]) for x in args.from_log.read_text().splitlines() if x.startswith("  {")]
        render(rows, sorted({str(r["provider"]) for r in rows}), [], args, machine())
        return 0

    m = machine()
    rows = []
    providers = [p.strip() for p in args.provider.split(",") if p.strip()]
    skipped = []
    for provider in providers:
        for lang in [x.strip() for x in args.lang.split(",") if x.strip()]:
            for size in [int(x) for x in args.sizes.split(",") if x]:
                if provider == "local" and size > args.local_max_files:
                    skipped.append(f"{lang}/{size}")
                    continue
                print(f"engine: {lang} {size} files, provider {provider} ...", file=sys.stderr, flush=True)
                r = run_one(lang, size, provider, args)
                r["loadavg_after"] = round(__import__("os").getloadavg()[0], 2)
                rows.append(r)
                print("  " + json.dumps(r), file=sys.stderr, flush=True)
                render(rows, providers, skipped, args, m)  # after every run: a stopped run keeps its figures
    return 0


def render(
    rows: list[dict], providers: list[str], skipped: list[str], args: argparse.Namespace, m: dict
) -> None:
    def g(r: dict[str, object], k: str) -> object:
        return r.get(k, float("nan"))

    table = md_table(
        [
            "lang",
            "files",
            "provider",
            "chunks",
            "cold index s",
            "chunks/s",
            "raw embed chunks/s",
            "overhead %",
            "no-op s",
            "edit→search buffer ms",
            "edit→search disk ms",
            "search p50 ms",
            "p95 ms",
            "peak RSS MB",
            "index MB",
            "needles Hit@5",
            "load avg",
        ],
        [
            [
                r["lang"],
                r["files"],
                r["provider"],
                g(r, "chunks"),
                g(r, "cold_index_s"),
                g(r, "chunks_per_s"),
                g(r, "raw_embed_per_s"),
                g(r, "overhead_pct"),
                g(r, "noop_s"),
                g(r, "edit_buffer_ms"),
                g(r, "edit_disk_ms"),
                g(r, "search_p50_ms"),
                g(r, "search_p95_ms"),
                g(r, "peak_rss_mb"),
                g(r, "index_mb"),
                g(r, "needle_hit5"),
                g(r, "loadavg_after"),
            ]
            for r in rows
        ],
    )
    notes = ""
    if skipped:
        notes = (
            f"Provider local skipped for {', '.join(skipped)} (over --local-max-files {args.local_max_files}: "
            "local embedding at a few chunks/s on this CPU would take hours).\n"
        )
    md = f"### Engine: {', '.join(providers)}\n\n{table}\n\n{notes}{machine_line(m)}\nCommand: `{command_line()}`\n"
    write_outputs(
        args.name or f"engine-{'-'.join(providers)}",
        {"machine": m, "command": command_line(), "results": rows},
        md,
    )


if __name__ == "__main__":
    raise SystemExit(main())

"""mnemo in one process, for the side-by-side benchmark: the same job file and RESULT line as driver.mjs.

    python benchmarks/peers/mnemo_child.py JOB.json

JOB: {ws, mode ("keyword" | "hybrid"), k, warmup, queries: [str], noop: n, edits: [{path, text, marker}]}.
The index must already exist (``mnemo index``); opening it and loading the model count as ``load_ms``.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(argv: list[str]) -> int:
    from mnemo.services import build_services

    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    ws = Path(job["ws"])
    k = int(job["k"])
    out: dict[str, object] = {}
    t0 = time.perf_counter()
    services = build_services(ws, provider="none" if job["mode"] == "keyword" else "local")
    memory = services.memory

    def search(q: str) -> list[str]:
        return [h.path for h in memory.search(q, max_results=k, min_score=0.0).results]

    try:
        memory.sync()  # opens the index (nothing to do: it was just built)
        if job["mode"] == "hybrid":
            _ = memory.embedder.dims  # loads the model
        out["load_ms"] = (time.perf_counter() - t0) * 1000
        if job.get("warmup"):
            t = time.perf_counter()
            search(job["warmup"])
            out["warmup_ms"] = (time.perf_counter() - t) * 1000
        rows = []
        for q in job["queries"]:
            t = time.perf_counter()
            paths = search(q)
            rows.append({"ms": (time.perf_counter() - t) * 1000, "paths": paths})
        out["search"] = rows
        noop = []
        for _ in range(int(job.get("noop", 0))):
            t = time.perf_counter()
            memory.sync()
            noop.append((time.perf_counter() - t) * 1000)
        out["noop_ms"] = noop
        edits = []
        for e in job.get("edits", []):
            t = time.perf_counter()
            (ws / e["path"]).write_text(e["text"], encoding="utf-8")
            memory.sync()
            paths = search(e["marker"])
            edits.append({"ms": (time.perf_counter() - t) * 1000, "found": e["path"] in paths[:5]})
        out["edits"] = edits
    finally:
        services.close()
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

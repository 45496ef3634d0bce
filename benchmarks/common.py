"""Helpers shared by the engine benchmarks: output files, Markdown tables, machine description, caching."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine() -> dict[str, Any]:
    """What the figures were measured on (CPU model, cores, load at the time, versions)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        rev = ""
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "loadavg": [round(x, 2) for x in load],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": rev,
        "date": datetime.now().strftime("%Y-%m-%d %H:%M"),
    }


def machine_line(m: dict[str, Any]) -> str:
    return (
        f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, load average at start "
        f"{m['loadavg'][0]:.2f} (the cores were shared with other work), commit {m['commit']}, {m['date']}."
    )


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[idx]


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            if v != v:  # nan
                return "n/a"
            return f"{v:.3f}" if abs(v) < 10 else f"{v:,.1f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_outputs(name: str, data: dict[str, Any], markdown: str) -> None:
    """benchmarks/out/<name>.json and .md; the table is printed too."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    (OUT / f"{name}.md").write_text(markdown + "\n", encoding="utf-8")
    print(markdown)
    print(f"\nwrote {OUT / name}.json and .md", file=sys.stderr)


def command_line() -> str:
    args = " ".join(a if " " not in a else repr(a) for a in sys.argv[1:])
    return f"python benchmarks/{Path(sys.argv[0]).name} {args}".strip()


class CachingEmbedder:
    """Wraps an embedder with a persistent text -> vector cache (for quality runs only, never timings).

    Retrieval quality does not depend on how fast a vector was made, so runs over the same texts (another
    chunk size, another decay mode, a re-run) reuse vectors from ``path`` instead of recomputing them.
    """

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner = inner
        self.path = path
        self.cache: dict[str, np.ndarray] = {}
        self.dirty = 0
        self.computed = 0
        self.last_save = time.monotonic()
        if path.is_file():
            with np.load(path) as data:
                self.cache = {k: data[k] for k in data.files}

    provider = property(lambda self: self.inner.provider)
    model = property(lambda self: self.inner.model)
    dims = property(lambda self: self.inner.dims)
    max_tokens = property(lambda self: self.inner.max_tokens)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        for text in texts:
            key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]
            vec = self.cache.get(key)
            if vec is None:
                vec = self.inner.embed([text])[0]
                self.cache[key] = vec
                self.dirty += 1
                self.computed += 1
            out.append(vec)
        if self.dirty and time.monotonic() - self.last_save > 60:
            self.save()
        return np.asarray(out, dtype=np.float32)

    def save(self) -> None:
        if not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, **self.cache)
        tmp.replace(self.path)
        self.dirty = 0
        self.last_save = time.monotonic()

    def close(self) -> None:
        self.save()
        self.inner.close()


def install_embedder(services: Any, embedder: Any) -> None:
    """Swap the embedder a built MemoryService uses (indexer and searcher share it)."""
    memory = services.memory
    memory.embedder = embedder
    memory.indexer.embedder = embedder
    memory.searcher.embedder = embedder


def copy_of_index(workspace: Path, prefix: str) -> tuple[Path, Path]:
    """A copy of an indexed workspace (so a benchmark never writes the original's index), without the
    writer files a running server left: (temporary folder to remove, the copy)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    ws = tmp / "ws"
    shutil.copytree(workspace, ws)
    for stale in (ws / ".mnemo").glob("writer.*"):
        stale.unlink()
    return tmp, ws

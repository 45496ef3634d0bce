"""Where a server's resident memory goes: VmRSS after each step of a start-up, in a fresh process per variant.

    python benchmarks/bench_memory.py [--workspace DIR] [--variants default,blas1,...]

Steps (one process, in order): Python; pygls + lsprotocol (what ``mnemo serve`` imports to answer
``initialize``); NumPy; DuckDB; pyarrow; the core (mnemo.memory.service); llama_cpp; the model
prepared (servers do it before opening the index); the index opened (writable, fts + vss loaded); the
BM25 postings loaded (one keyword search); the MiniLM model loaded (a no-op once prepared); one hybrid
search (which loads the writer's vectors and rows); a long text embedded (a 512-token window
and a short one: llama.cpp's output buffer grows to its largest). Each step shows the RSS after it and,
in parentheses, the highest RSS during it (VmHWM, reset before each step through
``/proc/self/clear_refs``). The workspace must be indexed with the local model (default: the template,
indexed into a temporary copy first). Variants change one setting each:

- ``default``: as a server runs: the model prepared (loaded, its output buffer grown to a whole
  window: :func:`mnemo.embeddings.prepare`) before the index opens;
- ``lazy``: the model loaded by the first hybrid search instead (what servers did before);
- ``blas1``: ``OPENBLAS_NUM_THREADS=1`` before NumPy loads (the command line sets it);
- ``nommap``: the GGUF read into memory instead of mapped (``use_mmap=False``);
- ``duck1``: DuckDB with one thread and ``memory_limit = '128MB'``;
- ``q8``: the model converted to Q8_0 (embeddings/gguf_convert.py) instead of F16.

RSS is the process's VmRSS from ``/proc/self/status`` (file-backed pages of mapped libraries and of a
mapped model count once touched). Prints one Markdown table; MB = 2**20 bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = [
    "python",
    "pygls",
    "numpy",
    "duckdb",
    "pyarrow",
    "core",
    "llama_cpp",
    "model prepared",
    "index open",
    "keyword search",
    "model loaded",
    "hybrid search",
    "long text embedded",
]
VARIANTS = ("default", "lazy", "blas1", "nommap", "duck1", "q8")


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


class _Steps(dict[str, tuple[float, float]]):
    """Step name -> (VmRSS after it, VmHWM during it), the peak reset after each reading."""

    def __setitem__(self, step: str, rss: float) -> None:  # type: ignore[override]
        super().__setitem__(step, (rss, _status_mb("VmHWM")))
        with contextlib.suppress(OSError):
            Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS


def rss_mb() -> float:
    return _status_mb("VmRSS")


def child(ws: Path, variant: str) -> dict[str, tuple[float, float]]:
    """The steps in this process (a fresh one per variant)."""
    out = _Steps()
    out["python"] = rss_mb()
    import lsprotocol.types  # noqa: F401
    import pygls.lsp.server  # noqa: F401

    out["pygls"] = rss_mb()
    import numpy  # noqa: F401

    out["numpy"] = rss_mb()
    import duckdb  # noqa: F401

    out["duckdb"] = rss_mb()
    import pyarrow  # noqa: F401

    out["pyarrow"] = rss_mb()
    from mnemo.services import build_services

    out["core"] = rss_mb()
    import llama_cpp  # noqa: F401

    out["llama_cpp"] = rss_mb()
    services = build_services(ws)
    memory = services.memory
    if variant == "nommap":
        _patch_llama(use_mmap=False)
    if variant == "duck1":
        from mnemo.index import duck

        original = duck.connect

        def small(path: object, **kw: object) -> object:
            con = original(path, **kw)  # type: ignore[arg-type]
            con.execute("SET threads = 1")
            con.execute("SET memory_limit = '128MB'")
            return con

        duck.connect = small  # type: ignore[assignment]
        import mnemo.index.opening as opening

        opening.connect = small  # type: ignore[assignment]
    if variant != "lazy":
        from mnemo.embeddings import prepare

        prepare(memory.embedder)
    out["model prepared"] = rss_mb()
    memory.ensure_open()
    out["index open"] = rss_mb()
    with memory.indexer.reading() as reader:
        assert reader is not None
        reader.keyword_top(["billing", "database"], 10)
    out["keyword search"] = rss_mb()
    memory.embedder.embed(["warm up"])
    out["model loaded"] = rss_mb()
    memory.search("what database did we choose for billing")
    out["hybrid search"] = rss_mb()
    memory.embedder.embed(["word " * 600, "a short text"])
    out["long text embedded"] = rss_mb()
    services.close()
    return out


def _patch_llama(**params: object) -> None:
    import llama_cpp

    original = llama_cpp.Llama.__init__

    def init(self: object, *args: object, **kw: object) -> None:
        kw.update(params)
        original(self, *args, **kw)  # type: ignore[arg-type]

    llama_cpp.Llama.__init__ = init  # type: ignore[method-assign]


def index_template(ws: Path, env: dict[str, str]) -> None:
    shutil.copytree(ROOT / "workspace-template", ws)
    subprocess.run([sys.executable, "-m", "mnemo", "index", "-w", str(ws)], env=env, check=True)


def q8_model(models: Path) -> Path:
    from mnemo.embeddings.gguf_convert import ensure_default_gguf

    return ensure_default_gguf(models, quant="q8_0")[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workspace", type=Path)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--child", nargs=2, metavar=("WS", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(dict(child(Path(args.child[0]), args.child[1]))))
        return 0
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-memory-") as tmp:
        ws = args.workspace or Path(tmp) / "ws"
        if args.workspace is None:
            index_template(ws, env)
        rows: dict[str, dict[str, list[float]]] = {}
        for variant in args.variants.split(","):
            run_env = dict(env)
            target = ws
            if variant == "blas1":
                run_env["OPENBLAS_NUM_THREADS"] = "1"
            if variant == "q8":
                from mnemo.embeddings.base import default_cache_dir

                model = q8_model(default_cache_dir(None) / "models")
                target = Path(tmp) / "ws-q8"
                shutil.copytree(ws, target, ignore=shutil.ignore_patterns(".mnemo"))
                toml = target / "mnemo.toml"
                text, line = toml.read_text(encoding="utf-8"), f'model_path = "{model}"'
                if "[embedding]" in text:
                    text = text.replace("[embedding]", f"[embedding]\n{line}", 1)
                else:
                    text += f"\n[embedding]\n{line}\n"
                toml.write_text(text, encoding="utf-8")
                subprocess.run(
                    [sys.executable, "-m", "mnemo", "index", "-w", str(target)], env=run_env, check=True
                )
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(target), variant],
                env=run_env,
                capture_output=True,
                text=True,
                check=True,
            )
            rows[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    names = list(rows)
    print("| VmRSS MB after (peak during) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for step in STEPS:
        cells = (f"{rows[n][step][0]:.0f} ({rows[n][step][1]:.0f})" for n in names)
        print(f"| {step} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Embedding at the speed of the model: raw llama.cpp against mnemo's indexing path, on the same chunks.

    python benchmarks/bench_embed.py [--files 30] [--rounds 3] [--quant f16|q8_0]

The chunks are those of the first ``--files`` notes of a synthetic English workspace (benchmarks/synthetic.py),
as the indexer makes them (heading path + text: what the model sees). Each round measures, in turn:

- ``raw``: llama.cpp alone, one sequence per ``llama_decode`` on pre-tokenized input (the floor: no
  Python per chunk beyond filling the batch);
- ``raw x2``: as many sequences per decode as fit in the model's 512-token batch (two of ~230 tokens);
- ``embedder``: mnemo's ``LocalEmbedder.embed([text])`` per chunk (tokenizing included);
- ``index``: ``mnemo index`` of those notes into a fresh index with an empty embedding cache (keyword side
  committed first, then the pending chunks embedded in committed batches of 32): the embedding part, i.e.
  the sync's time after its keyword commit.

Rates are chunks per wall second and CPU seconds per chunk (this process; the model runs in-process);
the load average is read before each measurement. One model (the converted MiniLM, ``--quant`` picks
F16 or Q8_0), its threads as mnemo picks them.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "server"))  # after PYTHONPATH: a tree given there is the one measured

from benchmarks.common import cpu_seconds  # noqa: E402
from benchmarks.synthetic import generate  # noqa: E402


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def chunk_inputs(files: dict[str, str]) -> list[str]:
    from mnemo.index.file_rows import embedding_input
    from mnemo.markdown.chunker import chunk_markdown

    return [embedding_input(c) for rel in sorted(files) for c in chunk_markdown(rel, files[rel])]


def several_sequences(embedder: Any) -> Any:
    """A second llama.cpp context on the embedder's model that holds many sequences: mnemo's own holds
    one (``native_probe.model_params(one_sequence=True)``: llama.cpp reserves a row of logits for each).
    Loaded under the same model parameters as mnemo's (``model_params``: the extra buffer types only
    where this CPU's probe allows them, so a CPU with AMX loads it as mnemo does)."""
    import llama_cpp

    from mnemo import native_probe

    first = embedder._load()
    path, _ = embedder._resolve()
    with native_probe.model_params(embedder._extra_buffer_types(path)):
        return llama_cpp.Llama(
            model_path=str(path),
            embedding=True,
            n_ctx=first.n_ctx(),
            n_batch=first.n_batch,
            n_ubatch=first.n_batch,
            n_threads=embedder._threads,
            n_threads_batch=embedder._threads,
            pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
            n_gpu_layers=0,
            verbose=False,
        )


def raw_decoder(llm: Any, per_decode: int) -> Callable[[list[list[int]]], None]:
    """Decode pre-tokenized sequences, up to ``per_decode`` (and the batch's tokens) per llama_decode."""
    import llama_cpp

    limit = llm.n_batch

    def run(sequences: list[list[int]]) -> None:
        i = 0
        while i < len(sequences):
            llm._batch.reset()
            llm._ctx.kv_cache_clear()
            used = n = 0
            while i < len(sequences) and n < per_decode and used + len(sequences[i]) <= limit:
                llm._batch.add_sequence(sequences[i], n, True)
                used += len(sequences[i])
                i += 1
                n += 1
            llm._ctx.decode(llm._batch)
            for seq in range(n):
                assert llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, seq)
        llm._batch.reset()

    return run


def timed(label: str, count: int, work: Callable[[], tuple[float, float] | None]) -> dict[str, Any]:
    """Measure ``work``; when it returns (wall s, CPU s) those are its own figures (the index's embedding part)."""
    load = loadavg()
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    own = work()
    wall, cpu = own if own is not None else (time.perf_counter() - t0, cpu_seconds() - cpu0)
    row = {
        "label": label,
        "chunks": count,
        "wall": wall,
        "rate": count / wall,
        "cpu": cpu / count,
        "load": load,
    }
    print(
        f"{label:10} {row['rate']:6.2f} chunks/s  {row['cpu']:.3f} CPU s/chunk  load {load:.2f}",
        file=sys.stderr,
        flush=True,
    )
    return row


def index_once(files: dict[str, str], model_path: Path | None, tmp: Path) -> tuple[float, float, int]:
    """The indexing path on a fresh workspace: (wall s, CPU s) of embedding its pending chunks after the
    keyword side was committed, and how many it embedded."""
    from mnemo.services import build_services

    ws = tmp / "ws"
    shutil.rmtree(ws, ignore_errors=True)
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    toml = '[embedding]\nprovider = "local"\n' + (f'model_path = "{model_path}"\n' if model_path else "")
    (ws / "mnemo.toml").write_text(toml, encoding="utf-8")
    services = build_services(ws)
    try:
        services.memory.embedder.embed(["load the model first"])  # not part of the indexing rate
        services.memory.sync(vectors="later")  # the keyword side, every chunk pending
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        report = services.memory.sync(vectors="wait")  # nothing changed on disk: only the vectors
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    finally:
        services.close()
    return wall, cpu, report.chunks_embedded


def embed_each(embedder: Any, inputs: list[str]) -> None:
    for text in inputs:
        embedder.embed([text])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quant", choices=["f16", "q8_0"], default="f16")
    args = parser.parse_args(argv)

    from mnemo.embeddings.base import default_cache_dir
    from mnemo.embeddings.gguf_convert import ensure_default_gguf
    from mnemo.embeddings.local import LocalEmbedder

    models = default_cache_dir(None) / "models"
    model_path = None if args.quant == "f16" else ensure_default_gguf(models, quant=args.quant)[0]
    spec = generate(400, "en")
    files = {rel: spec.files[rel] for rel in sorted(spec.files)[: args.files]}
    inputs = chunk_inputs(files)
    embedder = LocalEmbedder(model_path=model_path, models_dir=models)
    embedder.embed(["warm up"])
    sequences = [w for text in inputs for w in embedder.token_windows(text)]
    tokens = statistics.mean(len(s) for s in sequences)
    print(f"{len(inputs)} chunks, {len(sequences)} windows, {tokens:.0f} tokens on average", file=sys.stderr)
    one, two = raw_decoder(embedder._load(), 1), raw_decoder(several_sequences(embedder), 64)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-embed-") as tmp:
        for _ in range(args.rounds):
            rows.append(timed("raw", len(sequences), lambda: one(sequences)))  # type: ignore[func-returns-value]
            rows.append(timed("raw x2", len(sequences), lambda: two(sequences)))  # type: ignore[func-returns-value]
            rows.append(timed("embedder", len(inputs), lambda: embed_each(embedder, inputs)))
            wall, cpu, embedded = index_once(files, model_path, Path(tmp))
            rows.append(timed("index", embedded, lambda w=wall, c=cpu: (w, c)))
    embedder.close()
    print(
        f"\n`python benchmarks/bench_embed.py {' '.join(sys.argv[1:])}`: {len(inputs)} chunks ({tokens:.0f} tokens)"
    )
    print("\n| path | chunks/s (median) | CPU s per chunk | of raw | loads |\n|---|---|---|---|---|")
    raw_rate = statistics.median(r["rate"] for r in rows if r["label"] == "raw")
    for label in ("raw", "raw x2", "embedder", "index"):
        mine = [r for r in rows if r["label"] == label]
        rate = statistics.median(r["rate"] for r in mine)
        cpu = statistics.median(r["cpu"] for r in mine)
        loads = ", ".join(f"{r['load']:.1f}" for r in mine)
        print(f"| {label} | {rate:.2f} | {cpu:.3f} | {rate / raw_rate:.0%} | {loads} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

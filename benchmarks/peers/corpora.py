"""The corpora all three systems index: synthetic workspaces and BEIR-format sets (used by path, never copied).

A corpus is a set of Markdown files (workspace-relative path -> text), the queries timed and scored against
it, their relevance judgements (query id -> {path: grade}) and the files an edit may touch. Every system gets
its own fresh copy of the files, so one system's edits never reach another's index.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.bench_engine import EDIT_MARKERS, QUERY_WORDS
from benchmarks.bench_retrieval import load_beir


@dataclass
class Corpus:
    name: str
    lang: str
    files: dict[str, str]
    queries: list[tuple[str, str]]
    """(query id, text): the scored queries first, then unscored ones that only add latency samples."""
    qrels: dict[str, dict[str, int]]
    edit_paths: list[str] = field(default_factory=list)

    @property
    def scored(self) -> list[tuple[str, str]]:
        return [q for q in self.queries if q[0] in self.qrels]

    def write(self, ws: Path) -> None:
        if ws.exists():
            shutil.rmtree(ws)
        for rel, text in self.files.items():
            path = ws / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def edits(self, n: int, seed: int = 3) -> list[dict[str, str]]:
        """``n`` one-paragraph edits: {path, text (the whole new file), marker (a query only it answers)}."""
        rng = random.Random(seed)
        out: list[dict[str, str]] = []
        for k in range(n):
            rel = rng.choice(self.edit_paths)
            lines = self.files[rel].splitlines()
            prose = [i for i, line in enumerate(lines) if line and line[0] not in "#-`|" and len(line) > 20]
            at = rng.choice(prose) if prose else len(lines)
            marker = EDIT_MARKERS[self.lang][k % len(EDIT_MARKERS[self.lang])].format(k=f"e{k}")
            sep = ". " if self.lang == "en" else "。"
            lines[at:at] = [
                marker + sep + ("Edited paragraph." if self.lang == "en" else "修改过的段落。"),
                "",
            ]
            out.append({"path": rel, "text": "\n".join(lines) + "\n", "marker": marker})
        return out


def synthetic(lang: str, files: int, seed: int = 7, latency_queries: int = 60) -> Corpus:
    """benchmarks/synthetic.py's workspace; its needle queries are scored, generated ones pad to the count."""
    from benchmarks.synthetic import generate

    spec = generate(files, lang, seed, write_to=None)
    queries = [(f"n{i}", n.query) for i, n in enumerate(spec.needles)]
    qrels = {f"n{i}": {n.path: 1} for i, n in enumerate(spec.needles)}
    rng = random.Random(5)
    while len(queries) < latency_queries:
        a, b = rng.sample(QUERY_WORDS[lang], 2)
        queries.append((f"g{len(queries)}", f"{a} {b}" if lang == "en" else a + b))
    needle_paths = {n.path for n in spec.needles}
    edit_paths = [p for p in sorted(spec.files) if p not in needle_paths and p != "MEMORY.md"]
    return Corpus(f"synthetic-{lang}-{files}", lang, dict(spec.files), queries, qrels, edit_paths)


def beir(folder: Path, lang: str, max_docs: int = 0, max_queries: int = 0) -> Corpus:
    """A BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) as ``memory/<id>.md`` files.

    ``max_docs`` keeps the first documents in file-name order and only the queries with a relevant document
    among them (as benchmarks/bench_retrieval.py does); ``max_queries`` keeps the first queries after that.
    """
    ds = load_beir(folder, max_docs)
    tmp = Path("/tmp/mnemo-peers-beir") / ds.name
    if not tmp.is_dir():
        ds.write(tmp)
    files = {
        str(p.relative_to(tmp)): p.read_text(encoding="utf-8") for p in sorted((tmp / "memory").glob("*.md"))
    }
    queries = ds.queries[:max_queries] if max_queries else ds.queries
    qrels = {qid: ds.qrels[qid] for qid, _ in queries}
    relevant = {p for rel in qrels.values() for p in rel}
    edit_paths = [p for p in sorted(files) if p not in relevant] or sorted(files)
    name = ds.name if not max_queries else f"{ds.name}-q{len(queries)}"
    return Corpus(name, lang, files, queries, qrels, edit_paths)


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``msmarco:docs=300,queries=50`` -> ("msmarco", {"docs": "300", "queries": "50"})."""
    name, _, rest = spec.partition(":")
    opts = dict(kv.split("=", 1) for kv in rest.split(",") if "=" in kv)
    return name.strip(), opts


def load(spec: str, data_dir: Path, latency_queries: int) -> Corpus:
    """Corpus by spec: ``en:100``, ``zh:1000`` (synthetic), ``msmarco[:docs=N,queries=M]``, ``cmrc[:...]``."""
    name, opts = parse_spec(spec)
    if name in ("en", "zh"):
        return synthetic(name, int(opts.get("files") or spec.split(":")[1]), latency_queries=latency_queries)
    folders = {"msmarco": ("msmarco-5k", "en"), "cmrc": ("cmrc2018-zh", "zh")}
    if name not in folders:
        raise SystemExit(f"unknown corpus {spec!r}: use en:N, zh:N, msmarco[:docs=N,queries=M], cmrc[:...]")
    folder, lang = folders[name]
    if not (data_dir / folder / "corpus.jsonl").is_file():
        raise SystemExit(f"{data_dir / folder} is not a BEIR folder: pass --data-dir (or leave {name} out)")
    return beir(data_dir / folder, lang, int(opts.get("docs", 0)), int(opts.get("queries", 0)))

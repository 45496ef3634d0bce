"""What every system driver offers the runner, and the mnemo driver (CLI, in-process child, LSP).

Each system gets ``root`` (its own folder): ``root/ws`` is its copy of the corpus, and whatever it keeps
(index, home, config) lives under ``root`` too, so nothing outside is touched and a rerun starts clean.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from benchmarks.peers.corpora import Corpus
from benchmarks.peers.procs import Timed, dir_bytes, result_line, run_timed, write_json

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


class System:
    """One search system over one corpus in one mode ("keyword" or "hybrid")."""

    name = "?"

    def __init__(self, root: Path, corpus: Corpus, mode: str, k: int = 10) -> None:
        self.root = root
        self.corpus = corpus
        self.mode = mode
        self.k = k
        self.ws = root / "ws"

    def setup(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        self.corpus.write(self.ws)
        self.configure()

    def configure(self) -> None:
        raise NotImplementedError

    def full_index(self) -> Timed:
        raise NotImplementedError

    def noop_cli(self) -> float:
        raise NotImplementedError

    def cli_search(self, query: str) -> tuple[float, list[str]]:
        raise NotImplementedError

    def cli_edit(self, edit: dict[str, str]) -> tuple[float, bool]:
        raise NotImplementedError

    def index_bytes(self) -> int:
        raise NotImplementedError

    def inproc_cmd(self, job_file: Path) -> tuple[list[str], dict[str, str] | None]:
        raise NotImplementedError

    def job_extra(self) -> dict[str, Any]:
        return {}

    def inproc(self, queries: list[str], noop: int, edits: list[dict[str, str]]) -> dict[str, Any]:
        """Searches, no-op syncs and edits in one long-lived process (``driver.mjs`` / ``mnemo_child.py``)."""
        job = {
            "system": self.name,
            "mode": self.mode,
            "ws": str(self.ws),
            "k": self.k,
            "warmup": queries[0] if queries else "",
            "queries": queries,
            "noop": noop,
            "edits": edits,
            **self.job_extra(),
        }
        job_file = write_json(self.root / "job.json", job)
        cmd, env = self.inproc_cmd(job_file)
        return result_line(run_timed(cmd, env=env, timeout=3600), f"{self.name} in-process")


class Mnemo(System):
    name = "mnemo"

    def __init__(self, root: Path, corpus: Corpus, mode: str, k: int = 10) -> None:
        super().__init__(root, corpus, mode, k)
        self.bin = str(Path(sys.executable).parent / "mnemo")

    def configure(self) -> None:
        provider = "none" if self.mode == "keyword" else "local"
        (self.ws / "mnemo.toml").write_text(
            f'[embedding]\nprovider = "{provider}"\nthreads = 0\n', encoding="utf-8"
        )

    def _run(self, *args: str) -> Timed:
        return run_timed([self.bin, *args, "--workspace", str(self.ws)], timeout=3600)

    def full_index(self) -> Timed:
        return self._run("index").check("mnemo index")

    def noop_cli(self) -> float:
        return self._run("index").check("mnemo index").seconds

    def _search(self, query: str, sync: bool) -> tuple[float, list[str]]:
        args = ["search", "--json", "-k", str(self.k), "--min-score", "0", query]
        timed = self._run(*args, *([] if sync else ["--no-sync"])).check("mnemo search")
        return timed.seconds, [r["path"] for r in json.loads(timed.stdout)["results"]]

    def cli_search(self, query: str) -> tuple[float, list[str]]:
        return self._search(query, sync=False)

    def cli_edit(self, edit: dict[str, str]) -> tuple[float, bool]:
        (self.ws / edit["path"]).write_text(edit["text"], encoding="utf-8")
        seconds, paths = self._search(edit["marker"], sync=True)  # `mnemo search` brings the index up to date
        return seconds, edit["path"] in paths[:5]

    def index_bytes(self) -> int:
        return dir_bytes(self.ws / ".mnemo")

    def inproc_cmd(self, job_file: Path) -> tuple[list[str], dict[str, str] | None]:
        return [sys.executable, str(HERE / "mnemo_child.py"), str(job_file)], None

    def lsp(self, queries: list[str], edits: list[dict[str, str]]) -> dict[str, Any]:
        from benchmarks.peers.mnemo_lsp import lsp_round_trips

        return lsp_round_trips(self.ws, queries, edits, self.k)

"""Drivers for the peers: OpenClaw's memory search and QMD, each on a throwaway home under its root folder.

How they run offline is in ../shared/docs/peer-benchmarks.md: OpenClaw without gateway or login (state, config
and home under ``root``; embeddings from a loopback OpenAI-compatible server over mnemo's GGUF file), QMD
with its index in ``root/cache`` and ``models.embed`` pointed at the same GGUF file (``qmd query
--no-rerank`` with ``lex:``/``vec:`` lines, since plain ``query`` and ``vsearch`` try to download models).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from benchmarks.peers.corpora import Corpus
from benchmarks.peers.install import Peers
from benchmarks.peers.procs import Timed, dir_bytes, run_timed
from benchmarks.peers.systems import HERE, System


class NodeSystem(System):
    def __init__(self, root: Path, corpus: Corpus, mode: str, peers: Peers, k: int = 10, **kw: Any) -> None:
        super().__init__(root, corpus, mode, k)
        self.peers = peers
        self.home = root / "home"

    def env(self) -> dict[str, str]:
        env = self.peers.env()
        env["HOME"] = str(self.home)
        return env

    def node(self, *args: str, timeout: float = 3600) -> Timed:
        return run_timed([str(self.peers.node), *args], env=self.env(), cwd=self.root, timeout=timeout)

    def inproc_cmd(self, job_file: Path) -> tuple[list[str], dict[str, str] | None]:
        return [str(self.peers.node), str(HERE / "driver.mjs"), str(job_file)], self.env()


class OpenClaw(NodeSystem):
    name = "openclaw"

    def __init__(self, root: Path, corpus: Corpus, mode: str, peers: Peers, k: int = 10, **kw: Any) -> None:
        super().__init__(root, corpus, mode, peers, k)
        self.embed_url = str(kw.get("embed_url", ""))
        self.tokenizer = str(kw.get("tokenizer", "trigram"))
        self.cli = str(peers.openclaw_pkg / "openclaw.mjs")

    def env(self) -> dict[str, str]:
        env = super().env()
        env["OPENCLAW_STATE_DIR"] = str(self.root / "state")
        env["OPENCLAW_CONFIG_PATH"] = str(self.root / "config.json")
        return env

    def configure(self) -> None:
        search: dict[str, Any] = {
            "enabled": True,
            "provider": "none",
            "fallback": "none",
            "sources": ["memory"],
            "rememberAcrossConversations": False,
            "store": {"fts": {"tokenizer": self.tokenizer}},
        }
        if self.mode == "hybrid":
            search["provider"] = "openai-compatible"
            search["model"] = "local-gguf"
            search["remote"] = {"baseUrl": self.embed_url, "apiKey": "local"}
        config = {"agents": {"defaults": {"workspace": str(self.ws)}}, "memory": {"search": search}}
        self.home.mkdir(parents=True, exist_ok=True)
        (self.root / "state").mkdir(exist_ok=True)
        (self.root / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")

    def full_index(self) -> Timed:
        return self.node(self.cli, "memory", "index", "--agent", "main", "--force").check(
            "openclaw memory index"
        )

    def noop_cli(self) -> float:
        return (
            self.node(self.cli, "memory", "index", "--agent", "main").check("openclaw memory index").seconds
        )

    def cli_search(self, query: str) -> tuple[float, list[str]]:
        args = ["memory", "search", "--json", "--max-results", str(self.k), "--min-score", "0", query]
        timed = self.node(self.cli, *args).check("openclaw memory search")
        return timed.seconds, [r["path"] for r in json.loads(timed.stdout)["results"]]

    def cli_edit(self, edit: dict[str, str]) -> tuple[float, bool]:
        (self.ws / edit["path"]).write_text(edit["text"], encoding="utf-8")
        index_s = self.noop_cli()
        search_s, paths = self.cli_search(edit["marker"])
        return index_s + search_s, edit["path"] in paths[:5]

    def index_bytes(self) -> int:
        return dir_bytes(self.root / "state" / "agents")

    def job_extra(self) -> dict[str, Any]:
        return {"pkg": str(self.peers.openclaw_pkg)}


class Qmd(NodeSystem):
    name = "qmd"

    def __init__(self, root: Path, corpus: Corpus, mode: str, peers: Peers, k: int = 10, **kw: Any) -> None:
        super().__init__(root, corpus, mode, peers, k)
        self.model = str(kw.get("model", ""))
        self.cli = str(peers.qmd_pkg / "bin" / "qmd")
        self.config = root / "config" / "index.yml"
        self.db = root / "cache" / "qmd" / "index.sqlite"

    def env(self) -> dict[str, str]:
        env = super().env()
        env["XDG_CACHE_HOME"] = str(self.root / "cache")
        env["QMD_CONFIG_DIR"] = str(self.root / "config")
        env["QMD_FORCE_CPU"] = "1"
        # QMD cuts an over-long chunk to the model's context (512) minus 4 tokens, then detokenizes and
        # re-tokenizes it; with MiniLM's WordPiece that can come back over 512 and llama.cpp aborts
        # (GGML_ASSERT in get_rows). Its own setting for the embedding context leaves the margin.
        env["QMD_EMBED_CONTEXT_SIZE"] = "448"
        return env

    def configure(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.config.parent.mkdir(parents=True, exist_ok=True)

    def _set_model(self) -> None:
        """Point ``models.embed`` at the GGUF file (the env variable is ignored once a models block exists)."""
        text = self.config.read_text(encoding="utf-8")
        line = f"  embed: {self.model}"
        if re.search(r"^  embed: .*$", text, flags=re.M):
            text = re.sub(r"^  embed: .*$", line, text, flags=re.M)
        else:
            text = text.rstrip("\n") + f"\nmodels:\n{line}\n"
        self.config.write_text(text, encoding="utf-8")

    def _sync(self) -> Timed:
        timed = self.node(self.cli, "update").check("qmd update")
        if self.mode == "hybrid":
            embed = self.node(self.cli, "embed").check("qmd embed")
            timed = Timed(
                timed.seconds + embed.seconds,
                max(timed.peak_rss_mb, embed.peak_rss_mb),
                0,
                timed.stdout + embed.stdout,
                timed.stderr + embed.stderr,
            )
        return timed

    def full_index(self) -> Timed:
        add = self.node(self.cli, "collection", "add", str(self.ws), "--name", "mem", "--mask", "**/*.md")
        add.check("qmd collection add")
        if self.mode != "hybrid":
            return add
        self._set_model()
        embed = self.node(self.cli, "embed").check("qmd embed")
        return Timed(
            add.seconds + embed.seconds,
            max(add.peak_rss_mb, embed.peak_rss_mb),
            0,
            embed.stdout,
            embed.stderr,
        )

    def noop_cli(self) -> float:
        return self._sync().seconds

    def cli_search(self, query: str) -> tuple[float, list[str]]:
        if self.mode == "hybrid":
            args = [
                "query",
                "--no-rerank",
                "--format",
                "json",
                "-n",
                str(self.k),
                f"lex: {query}\nvec: {query}",
            ]
        else:
            args = ["search", "--format", "json", "-n", str(self.k), query]
        timed = self.node(self.cli, *args).check("qmd " + args[0])
        rows = json.loads(timed.stdout) if timed.stdout.strip().startswith("[") else []
        return timed.seconds, [re.sub(r"^qmd://[^/]+/", "", r["file"]) for r in rows]

    def cli_edit(self, edit: dict[str, str]) -> tuple[float, bool]:
        (self.ws / edit["path"]).write_text(edit["text"], encoding="utf-8")
        sync_s = self._sync().seconds
        search_s, paths = self.cli_search(edit["marker"])
        return sync_s + search_s, edit["path"] in paths[:5]

    def index_bytes(self) -> int:
        return dir_bytes(self.root / "cache" / "qmd")

    def job_extra(self) -> dict[str, Any]:
        return {
            "pkg": str(self.peers.qmd_pkg),
            "dbPath": str(self.db),
            "configPath": str(self.config),
            "model": self.model,
        }

"""``mnemo serve`` answers ``initialize`` before the core's heavy imports (issue 19: ``initialize`` <= 500 ms).

A fresh interpreter imports the CLI and the LSP server exactly as ``mnemo serve`` does, handles an
``initialize`` request in-process and serializes the answer; the modules loaded by then are checked. DuckDB,
NumPy, PyArrow, aiohttp, httpx, the agent, the policy engine and the secrets rules load after ``initialize``
(``initialized`` builds the services) or on first use. Timing lives in benchmarks/bench_startup.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LATER = (
    "duckdb",
    "numpy",
    "pyarrow",
    "aiohttp",
    "httpx",
    "llama_cpp",
    "git",
    "mnemo.services",
    "mnemo.memory.service",
    "mnemo.embeddings",
    "mnemo.agent",
    "mnemo.policy",
    "mnemo.secrets",
    "mnemo.index",
    "mnemo.security.audit",
)
"""Modules (and their submodules) that must not be loaded when ``initialize`` is answered."""

SCRIPT = """
import json, sys
from pathlib import Path
from mnemo.cli.main import build_parser
args = build_parser().parse_args(["serve", "--workspace", sys.argv[1]])  # what `mnemo serve` parses
from mnemo.lsp.setup import create_server
from lsprotocol import types
server = create_server(args.workspace)
params = server.protocol._converter.structure(
    {"processId": None, "rootUri": Path(sys.argv[1]).as_uri(), "capabilities": {}}, types.InitializeParams
)
steps = server.protocol.lsp_initialize(params)  # pygls yields to our initialize handler, then answers
handler, handler_args, _ = next(steps)
handler(*handler_args)
try:
    steps.send(None)
    raise AssertionError("lsp_initialize did not return")
except StopIteration as stop:
    answer = server.protocol._converter.unstructure(stop.value)
assert server.root is not None
assert answer["serverInfo"]["name"] == "mnemo", answer
print(json.dumps(sorted(sys.modules)))
"""


def modules_at_initialize(ws: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ws)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_initialize_path_skips_the_core_imports(tmp_path: Path) -> None:
    loaded = modules_at_initialize(tmp_path)
    assert "mnemo.lsp.handlers.lifecycle" in loaded and "pygls.lsp.server" in loaded  # it did run
    early = sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in LATER))
    assert early == [], f"imported before `initialize` is answered: {early}"

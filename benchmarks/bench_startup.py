"""``mnemo serve`` start-up: time from process spawn to the ``initialize`` response, and memory.

    python benchmarks/bench_startup.py [--runs 10] [--workspace DIR] [--no-search] [--importtime]

Each run spawns ``python -m mnemo serve --workspace DIR`` and speaks raw JSON-RPC over its pipes (no
pygls in this process, so the client's own imports do not count), timing spawn -> ``initialize`` response.
The first run then sends ``initialized``, waits for ``mnemo/status`` to say ``ready`` (index synced), reads
the server's RSS from ``/proc/<pid>/status`` (VmRSS, and VmHWM = peak), runs one ``mnemo/memorySearch``
(hybrid when the workspace's embedder is the local model: the model loads for it) and reads RSS again.
Without --workspace a fresh copy of the workspace template is indexed in a temporary folder.
``--importtime`` prints the slowest imports on the way to ``initialize`` (``python -X importtime``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class Peer:
    """A ``mnemo serve`` child and just enough of LSP's base protocol to talk to it."""

    def __init__(self, ws: Path, extra: tuple[str, ...] = ()) -> None:
        cmd = [sys.executable, *extra, "-m", "mnemo", "serve", "--workspace", str(ws)]
        err = subprocess.PIPE if extra else subprocess.DEVNULL  # -X importtime: read at the end
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self.next_id = 0

    def send(self, method: str, params: Any, *, notify: bool = False) -> int:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return self.next_id

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        length = 0
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the server exited (code {self.proc.poll()})")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        message: dict[str, Any] = json.loads(self.proc.stdout.read(length))
        return message

    def request(self, method: str, params: Any) -> Any:
        """Send a request, answer the server's own requests with null, and return our response's result."""
        wanted = self.send(method, params)
        while True:
            message = self._read()
            if "method" in message and "id" in message:  # a server -> client request
                body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": None}).encode()
                assert self.proc.stdin is not None
                self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                self.proc.stdin.flush()
            elif message.get("id") == wanted and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result")

    def memory_mb(self) -> dict[str, float]:
        out = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
        return out

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.send("exit", None, notify=True)
            self.proc.wait(timeout=15)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def initialize_params(ws: Path) -> dict[str, Any]:
    return {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": {}}


def time_initialize(ws: Path) -> tuple[float, Peer]:
    spawned = time.perf_counter()
    peer = Peer(ws)
    peer.request("initialize", initialize_params(ws))
    return 1000 * (time.perf_counter() - spawned), peer


def memory_run(ws: Path, query: str, timeout_s: float) -> dict[str, Any]:
    """Index (via the server), RSS at idle, one search, RSS after it."""
    _ms, peer = time_initialize(ws)
    try:
        peer.send("initialized", {}, notify=True)
        deadline = time.monotonic() + timeout_s
        status = peer.request("mnemo/status", {})
        while status.get("state") != "ready" or status.get("vectors", {}).get("pending"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"not ready after {timeout_s:.0f}s: {status}")
            time.sleep(0.2)
            status = peer.request("mnemo/status", {})
        time.sleep(1.0)  # let background embedding threads settle
        idle = peer.memory_mb()
        started = time.perf_counter()
        result = peer.request("mnemo/memorySearch", {"query": query, "maxResults": 5})
        first_search_ms = 1000 * (time.perf_counter() - started)
        after = peer.memory_mb()
        mode = (result or {}).get("mode") or status.get("mode")
        return {"idle": idle, "after_search": after, "first_search_ms": first_search_ms, "mode": mode}
    finally:
        peer.close()


def importtime_report(ws: Path, top: int) -> str:
    """The slowest imports (cumulative) of one ``python -X importtime`` run, up to ``initialize``."""
    peer = Peer(ws, ("-X", "importtime"))
    peer.request("initialize", initialize_params(ws))
    peer.close()
    assert peer.proc.stderr is not None
    rows = []
    for line in peer.proc.stderr.read().decode(errors="replace").splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _self, cumulative, name = line[len("import time:") :].split("|")
            if len(name) - len(name.lstrip()) <= 3:  # top-level imports and their direct children
                rows.append((int(cumulative), name.strip()))
    rows.sort(reverse=True)
    return "\n".join(f"{us / 1000:8.1f} ms  {name}" for us, name in rows[:top])


def template_workspace(tmp: Path) -> Path:
    ws = tmp / "ws"
    shutil.copytree(ROOT / "workspace-template", ws)
    return ws


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="spawn -> initialize measurements (default 10)")
    parser.add_argument("--workspace", type=Path, help="workspace to serve (default: a copy of the template)")
    parser.add_argument("--query", default="what did we decide about the database", help="the search")
    parser.add_argument("--no-search", action="store_true", help="skip the index / search / RSS run")
    parser.add_argument("--importtime", action="store_true", help="also print the slowest imports")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the index")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-startup-") as tmp:
        ws = args.workspace.resolve() if args.workspace else template_workspace(Path(tmp))
        times = []
        for _ in range(args.runs):
            ms, peer = time_initialize(ws)
            peer.close()
            times.append(ms)
        print(f"loadavg: {Path('/proc/loadavg').read_text().strip()}")
        print(f"| initialize from spawn, median of {len(times)} | {statistics.median(times):.0f} ms |")
        print(f"| initialize from spawn, p90 | {percentile(times, 0.9):.0f} ms |")
        print(f"| initialize from spawn, min / max | {min(times):.0f} / {max(times):.0f} ms |")
        if not args.no_search:
            mem = memory_run(ws, args.query, args.timeout)
            idle, after = mem["idle"], mem["after_search"]
            print(f"| RSS indexed, idle (VmRSS / VmHWM) | {idle['VmRSS']:.0f} / {idle['VmHWM']:.0f} MB |")
            print(
                f"| RSS after the first search, {mem['mode']} (VmRSS / VmHWM) | "
                f"{after['VmRSS']:.0f} / {after['VmHWM']:.0f} MB |"
            )
            print(f"| first search round trip | {mem['first_search_ms']:.0f} ms |")
        if args.importtime:
            print(importtime_report(ws, 25))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

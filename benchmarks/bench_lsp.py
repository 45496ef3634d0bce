"""LSP round trips against the real server: initialize latency, search round trip, edit-to-searchable, RSS.

    python benchmarks/bench_lsp.py --workspace DIR [--provider none|local] [--repeat 5]

``initialize`` is timed twice: from process spawn (includes Python start and imports) and from the
request alone. Edit-to-searchable is the time from ``didChange`` to a ``memorySearch`` response that
contains the new text (the search applies pending edits itself). RSS is read from /proc after the
model has been used (local provider). The client reads answers as an editor's does, as plain JSON
(``benchmarks.peers.mnemo_lsp.editor_like_converter``: pygls's client would spend ~3 ms of each search's
round trip building namedtuples).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import process_cpu_s  # noqa: E402
from benchmarks.peers.mnemo_lsp import bench_client, drain  # noqa: E402
from mnemo.memory.background_vectors import QUIET_S  # noqa: E402


async def settle(pid: int, quiet_s: float = 2.0, limit_s: float = 600.0) -> float:
    """Wait until the server has used under 5% of a core for ``quiet_s`` (its start-up work done: the
    workspace diagnostics pass, embedding); returns the seconds waited."""
    started = time.perf_counter()
    last = process_cpu_s(pid)
    while time.perf_counter() - started < limit_s:
        await asyncio.sleep(quiet_s)
        now = process_cpu_s(pid)
        if now - last < 0.05 * quiet_s:
            break
        last = now
    return time.perf_counter() - started


def peak_since(pid: int) -> float:
    """The server's VmHWM since the last call (then reset to its VmRSS through /proc/PID/clear_refs):
    the peak of one phase of the run."""
    peak = rss_mb(pid)
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    return peak


def rss_mb(pid: int, field: str = "VmHWM") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


async def bare_round_trips(client: Any, n: int) -> list[float]:
    """Round trips of a request the server answers without any work (a method it does not know: pygls
    answers MethodNotFound): the transport's share of every request."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        with contextlib.suppress(Exception):
            await client.protocol.send_request_async("mnemo/benchNoSuchMethod", {})
        times.append(1000 * (time.perf_counter() - t))
    return times


async def one_run(ws: Path, searches: int, warm: bool = False) -> dict[str, Any]:
    client = bench_client("bench")

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def _create(params: Any) -> None:
        return None

    for method in (
        "mnemo/indexStatus",
        types.PROGRESS,
        types.WINDOW_LOG_MESSAGE,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
    ):
        client.feature(method)(lambda params: None)

    spawned = time.perf_counter()
    await client.start_io(sys.executable, "-m", "mnemo", "serve", "--workspace", str(ws))
    stderr = asyncio.create_task(drain(client._server.stderr if client._server else None))
    sent = time.perf_counter()
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
    answered = time.perf_counter()
    client.initialized(types.InitializedParams())
    while (await client.protocol.send_request_async("mnemo/status", {}))["state"] != "ready":
        await asyncio.sleep(0.05)
    ready = time.perf_counter()
    pid = client._server.pid if client._server else 0
    settled = await settle(pid) if warm and pid else 0.0
    settled_rss = rss_mb(pid, "VmRSS") if pid else 0.0
    peaks = {"start": peak_since(pid) if pid else 0.0}
    bare = await bare_round_trips(client, searches)
    latencies = []
    for i in range(searches):
        t = time.perf_counter()
        await client.protocol.send_request_async("mnemo/memorySearch", {"query": f"deploy staging {i}"})
        latencies.append(1000 * (time.perf_counter() - t))
    searched_rss = rss_mb(pid, "VmRSS") if pid else 0.0
    peaks["searches"] = peak_since(pid) if pid else 0.0
    path = ws / "memory" / "deploy-runbook.md"
    uri = path.as_uri()
    text = path.read_text(encoding="utf-8")
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="markdown", version=1, text=text)
        )
    )
    edits = []
    for i in range(5):
        word = f"quokka{i}zeta"
        t = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=i + 2, uri=uri),
                [
                    types.TextDocumentContentChangeWholeDocument(
                        text=text + f"\n## Note {i}\n{word} rollout.\n"
                    )
                ],
            )
        )
        result = await client.protocol.send_request_async("mnemo/memorySearch", {"query": word})
        assert any(word in r["snippet"] for r in result["results"]), "edit not searchable"
        edits.append(1000 * (time.perf_counter() - t))
    peaks["edits"] = peak_since(pid) if pid else 0.0
    if warm and pid:
        # Idle past the writer's quiet delay, after which it checkpoints what it holds for the edits.
        await settle(pid, quiet_s=QUIET_S + 2.0)
        peaks["checkpoint"] = peak_since(pid)
    rss = max(peaks.values())
    final_rss = rss_mb(pid, "VmRSS") if pid else 0.0
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    stderr.cancel()
    return {
        "init_from_spawn_ms": 1000 * (answered - spawned),
        "init_request_ms": 1000 * (answered - sent),
        "ready_s": ready - answered,
        "settled_s": settled,
        "search_ms": latencies,
        "bare_ms": bare,
        "edit_ms": edits,
        "rss_mb": rss,
        "peaks": peaks,
        "settled_rss_mb": settled_rss,
        "searched_rss_mb": searched_rss,
        "final_rss_mb": final_rss,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workspace", type=Path, help="workspace to copy (default: workspace-template)")
    parser.add_argument("--provider", choices=["none", "local"], default="local")
    parser.add_argument("--repeat", type=int, default=3, help="server starts")
    parser.add_argument("--searches", type=int, default=50)
    parser.add_argument(
        "--warm",
        action="store_true",
        help="time searches only once the server is idle (start-up diagnostics and embedding done)",
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mnemo-bench-lsp-"))
    ws = tmp / "ws"
    shutil.copytree(args.workspace or ROOT / "workspace-template", ws)
    (ws / "mnemo.toml").write_text(f'[embedding]\nprovider = "{args.provider}"\n', encoding="utf-8")
    runbook = ws / "memory" / "deploy-runbook.md"  # the note the edit-to-searchable timing edits
    if not runbook.exists():
        runbook.parent.mkdir(parents=True, exist_ok=True)
        runbook.write_text(
            "# Deploy runbook\n\nStaging deploys go out from the release branch.\n", encoding="utf-8"
        )
    runs = [asyncio.run(one_run(ws, args.searches, args.warm)) for _ in range(args.repeat)]
    shutil.rmtree(tmp, ignore_errors=True)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    searches = sorted(x for r in runs for x in r["search_ms"])
    edits = sorted(x for r in runs for x in r["edit_ms"])
    p95 = searches[int(0.95 * (len(searches) - 1))]
    print(f"| metric ({args.provider}, {args.repeat} server starts) | value |")
    print("|---|---|")
    print(f"| initialize, request to response (median) | {med('init_request_ms'):.0f} ms |")
    print(f"| initialize, process spawn to response (median) | {med('init_from_spawn_ms'):.0f} ms |")
    warm = f", after {med('settled_s'):.0f} s settling" if args.warm else ""
    print(f"| search round trip p50 / p95{warm} | {statistics.median(searches):.1f} / {p95:.1f} ms |")
    bare = statistics.median(x for r in runs for x in r["bare_ms"])
    print(f"| round trip of a request without work (unknown method), p50 | {bare:.2f} ms |")
    print(
        f"| didChange to a search that sees the edit, median (max) | {statistics.median(edits):.0f} ({max(edits):.0f}) ms |"
    )
    print(f"| server peak RSS (VmHWM) | {max(r['rss_mb'] for r in runs):.0f} MB |")
    for phase in ("start", "searches", "edits", "checkpoint"):
        if phase in runs[0]["peaks"]:  # (the quiet checkpoint after the edits: with --warm)
            print(f"| peak during the {phase} | {max(r['peaks'][phase] for r in runs):.0f} MB |")
    print(f"| server RSS once settled, before the searches (VmRSS) | {med('settled_rss_mb'):.0f} MB |")
    print(f"| server RSS after the searches (VmRSS) | {med('searched_rss_mb'):.0f} MB |")
    settled_again = ", settled again" if args.warm else ""
    print(f"| server RSS after the edits{settled_again} (VmRSS) | {med('final_rss_mb'):.0f} MB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A tiny LSP client that starts ``mnemo serve`` and runs one search through it (used by ``make run``).

python clients/demo/mnemo_demo.py --workspace DIR "query"  (a client of the server, kept outside it)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient


async def run(workspace: Path, query: str, timeout: float) -> int:
    client = LanguageClient("mnemo-demo", "0.1")
    progress: list[str] = []

    @client.feature(types.PROGRESS)
    def on_progress(params: Any) -> None:
        value = params.value
        message = getattr(value, "message", None) or getattr(value, "title", None)
        if message and message not in progress:
            progress.append(message)
            print(f"  [server] {message}", file=sys.stderr)

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def on_create(params: Any) -> None:
        return None

    for quiet in ("mnemo/indexStatus", "mnemo/approvalsChanged", types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS):
        client.feature(quiet)(lambda params: None)

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        print(f"  [server log] {params.message}", file=sys.stderr)

    await client.start_io(sys.executable, "-m", "mnemo", "serve", "--workspace", str(workspace))
    started = time.perf_counter()
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                window=types.WindowClientCapabilities(work_done_progress=True)
            ),
            root_uri=workspace.as_uri(),
        )
    )
    print(f"initialize answered in {1000 * (time.perf_counter() - started):.0f} ms", file=sys.stderr)
    client.initialized(types.InitializedParams())
    deadline = time.monotonic() + timeout
    while True:
        status = await client.protocol.send_request_async("mnemo/status", {})
        if status.state == "ready":
            break
        if status.state == "error" or time.monotonic() > deadline:
            print(f"index not ready: {status.state} {status.message}", file=sys.stderr)
            await client.shutdown_async(None)
            client.exit(None)
            await client.stop()
            return 1
        await asyncio.sleep(0.2)
    result = await client.protocol.send_request_async("mnemo/memorySearch", {"query": query})
    print(f'\nmnemo/memorySearch "{query}" -> {len(result.results)} result(s), mode {result.mode}')
    for i, hit in enumerate(result.results, start=1):
        parts = hit.parts
        vector = "-" if parts.vector is None else f"{parts.vector:.2f}"
        print(f"{i}. {hit.citation}  score {hit.score:.3f} (vector {vector}, text {parts.text:.2f})")
        print("   " + hit.snippet.replace("\n", "\n   ")[:400])
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description="Run one memory search through the mnemo language server.")
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for indexing")
    parser.add_argument("query")
    args = parser.parse_args()
    return asyncio.run(run(args.workspace.resolve(), args.query, args.timeout))


if __name__ == "__main__":
    raise SystemExit(main())

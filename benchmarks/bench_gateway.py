"""Gateway load test: many sessions chatting at once through the WebSocket JSON-RPC front.

    python benchmarks/bench_gateway.py --sessions 200 --messages 5

The gateway runs in its own process on loopback with the real agent (context assembly, automatic recall
through the keyword index, JSONL transcripts, routing, lanes) over a synthetic 100-file workspace; only
the model is scripted (``--model-ms`` of simulated generation per turn, 0 by default), so the figures are
the gateway's own. Each session is one client connection (jsonrpc-websocket) that logs in by
challenge-response and sends its messages one after another; all sessions run at the same time.
Reported: throughput, latency percentiles per message, failures, the server's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "server"))  # after PYTHONPATH: a tree given there is the one measured
sys.path.insert(0, str(ROOT))

from benchmarks.common import command_line, machine, machine_line, md_table, percentile, write_outputs  # noqa: E402

TOKEN = "bench-token-" + "x" * 24


def serve(workspace: Path, model_ms: float, max_concurrent: int) -> int:
    """The server side (run as a child process): a gateway with a scripted model, until stdin closes."""
    from mnemo.agent import Agent
    from mnemo.agent.providers import ScriptedProvider
    from mnemo.gateway.server import Gateway
    from mnemo.gateway.settings import gateway_settings_from_dict
    from mnemo.services import build_services

    def reply(messages: Any) -> str:
        if model_ms:
            time.sleep(model_ms / 1000)
        return "noted: " + messages[-1].content[:60]

    services = build_services(workspace, provider="none")
    services.memory.sync()
    agent = Agent(workspace, services.memory, ScriptedProvider(default=reply), services.settings.agent)
    settings, _ = gateway_settings_from_dict(
        {"max_concurrent": max_concurrent, "queue_limit": 64}, {"MNEMO_GATEWAY_TOKEN": TOKEN}
    )

    async def run() -> None:
        gateway = Gateway(workspace, settings, agent, services.memory, workspace / ".mnemo" / "gw.json")
        port = await gateway.start("127.0.0.1", 0)
        print(port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await gateway.stop()

    asyncio.run(run())
    services.close()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak_rss_kb {peak_kb}", file=sys.stderr, flush=True)
    return 0


async def one_session(url: str, index: int, messages: int, latencies: list[float], errors: list[str]) -> None:
    from jsonrpc_websocket import Server

    from mnemo.gateway.auth import client_proof

    client = Server(url, timeout=600)
    try:
        await client.ws_connect()
        challenge = await client.auth.challenge()
        await client.auth.login(method="token", proof=client_proof("token", TOKEN, challenge["nonce"]))
        for m in range(messages):
            started = time.perf_counter()
            reply = await client.chat.send(
                text=f"session {index} message {m}: what did we decide about the billing database?",
                peer=f"user-{index}",
                stream=False,
            )
            latencies.append(time.perf_counter() - started)
            if not reply["text"].startswith("noted:"):
                errors.append(f"unexpected reply {reply['text'][:40]!r}")
    except Exception as exc:  # a failed session is counted, not fatal
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        await client.close()


async def drive(url: str, sessions: int, messages: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    started = time.perf_counter()
    await asyncio.gather(*(one_session(url, i, messages, latencies, errors) for i in range(sessions)))
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "latencies": latencies, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=200, help="concurrent sessions (default 200)")
    parser.add_argument("--messages", type=int, default=5, help="messages per session (default 5)")
    parser.add_argument(
        "--model-ms", type=float, default=0.0, help="simulated generation per turn (default 0)"
    )
    parser.add_argument("--max-concurrent", type=int, default=4, help="gateway.max_concurrent (default 4)")
    parser.add_argument("--files", type=int, default=100, help="synthetic workspace size (default 100)")
    parser.add_argument("--name", default="gateway", help="output name under benchmarks/out")
    parser.add_argument("--serve", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(Path(args.serve), args.model_ms, args.max_concurrent)

    from benchmarks.synthetic import generate

    info = machine()
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-gw-") as tmp:
        workspace = Path(tmp) / "ws"
        generate(args.files, "en", write_to=workspace)
        log_path = Path(tmp) / "server.log"
        log_file = log_path.open("w")
        child = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve",
                str(workspace),
                "--model-ms",
                str(args.model_ms),
                "--max-concurrent",
                str(args.max_concurrent),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert child.stdout is not None and child.stdin is not None
        port = int(child.stdout.readline().strip())
        result = asyncio.run(drive(f"ws://127.0.0.1:{port}/rpc", args.sessions, args.messages))
        child.stdin.close()
        child.wait(timeout=120)
        log_file.close()
        stderr = log_path.read_text()
        peak_kb = next(
            (int(line.split()[1]) for line in stderr.splitlines() if line.startswith("peak_rss_kb")), 0
        )
        transcripts = len(list((workspace / "sessions").glob("*.jsonl")))
    lat = [x * 1000 for x in result["latencies"]]
    row = [
        args.sessions,
        args.messages,
        len(lat),
        len(result["errors"]),
        transcripts,
        round(result["seconds"], 1),
        round(len(lat) / result["seconds"], 1),
        percentile(lat, 50),
        percentile(lat, 95),
        percentile(lat, 99),
        round(peak_kb / 1024),
        args.model_ms,
        info["loadavg"][0],
    ]
    table = md_table(
        [
            "sessions",
            "messages each",
            "replies",
            "failures",
            "transcripts",
            "wall s",
            "messages/s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "server peak RSS MB",
            "model ms/turn",
            "load",
        ],
        [row],
    )
    markdown = f"`{command_line()}`\n\n{machine_line(info)}\n\n{table}"
    if result["errors"]:
        markdown += "\n\nFirst failures: " + "; ".join(result["errors"][:3])
    write_outputs(
        args.name, {"machine": info, "args": vars(args), "row": row, "errors": result["errors"]}, markdown
    )
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""A scripted OpenAI-compatible chat endpoint on loopback, for tests that run the real CLI or LSP server
as a process (``[agent] provider = "openai"``) without a model.

``GET /v1/models`` lists one model, ``scripted`` (what ``provider = "auto"`` probes).
``reply(messages) -> (text, finish_reason)`` decides each answer; it is streamed word by word as SSE
chunks, ``delay_s`` apart. Tokenizer endpoints answer 404, so the provider estimates token counts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[list[dict[str, Any]]], tuple[str, str]]


class Endpoint:
    def __init__(self, reply: Reply, delay_s: float = 0.0) -> None:
        self.reply = reply
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self.url = ""


@contextmanager
def chat_endpoint(reply: Reply, delay_s: float = 0.0) -> Iterator[Endpoint]:
    endpoint = Endpoint(reply, delay_s)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # what the auto provider probes
            if not self.path.endswith("/v1/models"):
                self.send_error(404)
                return
            body = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if not self.path.endswith("/chat/completions"):
                self.send_error(404)
                return
            endpoint.requests.append(body)
            text, finish = endpoint.reply(body.get("messages", []))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for i, word in enumerate(text.split(" ")):
                    piece = word if i == 0 else " " + word
                    chunk = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    if endpoint.delay_s:
                        time.sleep(endpoint.delay_s)
                end = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
                self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading (cancel, loop guard)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()


def agent_toml(url: str, **extra: Any) -> str:
    """The ``[agent]`` section that points mnemo at the endpoint."""
    lines = ["[agent]", 'provider = "openai"', f'endpoint = "{url}"', 'model = "scripted"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    return "\n" + "\n".join(lines) + "\n"

"""The chat model's own process: ``python -m mnemo.agent.providers.model_process --parent PID``.

It loads the GGUF with llama.cpp and answers one JSON object per line on stdin with JSON lines on
stdout, so a crash inside llama.cpp (SIGILL, SIGSEGV, out of memory) ends this process only; the
server (:mod:`mnemo.agent.providers.model_client`) sees end of file and reports it. Requests:

- ``{"op": "load", "path", "n_ctx", "threads", "extra_buffer_types"}`` → ``{"ok": true, "n_ctx": N}``
- ``{"op": "count", "text"}`` → ``{"ok": true, "tokens": N}``
- ``{"op": "generate", "messages", "max_tokens", "temperature"}`` (optional ``repeat_penalty``,
  ``frequency_penalty``, ``presence_penalty``) → ``{"delta": "..."}`` lines, then
  ``{"ok": true, "finish": "stop" | "length" | "cancelled"}``
- ``{"op": "cancel"}`` (no answer): the running generation stops at its next token.

Any failure answers ``{"error": "..."}``. The process exits when stdin closes or its parent dies
(``PR_SET_PDEATHSIG``), so it never outlives the server.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import queue
import signal
import sys
import threading
from collections.abc import Sequence
from typing import IO, Any

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Ask the kernel for SIGKILL when the parent goes; exit now if it is already gone."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: end of file on stdin still ends the process
        pass
    if parent and os.getppid() != parent:
        os._exit(0)


class ModelServer:
    """Handles requests one at a time; ``cancel`` is set by the stdin reader while a reply streams."""

    def __init__(self, out: IO[str], cancel: threading.Event) -> None:
        self._out = out
        self._cancel = cancel
        self._llm: Any = None

    def send(self, message: dict[str, Any]) -> None:
        self._out.write(json.dumps(message, ensure_ascii=False) + "\n")
        self._out.flush()

    def handle(self, request: dict[str, Any]) -> None:
        op = request.get("op")
        try:
            if op == "load":
                self.send({"ok": True, "n_ctx": self._load(request)})
            elif op == "count":
                tokens = self._model().tokenize(
                    str(request["text"]).encode("utf-8"), add_bos=False, special=False
                )
                self.send({"ok": True, "tokens": len(tokens)})
            elif op == "generate":
                self.send({"ok": True, "finish": self._generate(request)})
            else:
                self.send({"error": f"unknown request {op!r}"})
        except Exception as exc:  # every failure goes back to the parent as text
            self.send({"error": f"{type(exc).__name__}: {exc}"})

    def _model(self) -> Any:
        if self._llm is None:
            raise RuntimeError("no model loaded")
        return self._llm

    def _load(self, request: dict[str, Any]) -> int:
        from mnemo.embeddings.threads import brief_spinning

        brief_spinning()
        import llama_cpp

        from mnemo.native_probe import model_params

        if self._llm is not None:
            self._llm.close()
            self._llm = None
        threads = int(request["threads"])
        with model_params(bool(request["extra_buffer_types"])):
            # verbose=True: verbose=False would point fds 1 and 2 at /dev/null while loading; llama.cpp's
            # log lines go to stderr, which the parent keeps for its crash message.
            self._llm = llama_cpp.Llama(
                model_path=str(request["path"]),
                n_ctx=int(request["n_ctx"]),
                n_threads=threads,
                n_threads_batch=threads,
                n_gpu_layers=0,
                verbose=True,
            )
        return int(self._llm.n_ctx())

    def _generate(self, request: dict[str, Any]) -> str:
        self._cancel.clear()
        chunks = self._model().create_chat_completion(
            messages=request["messages"],
            stream=True,
            max_tokens=int(request["max_tokens"]),
            temperature=float(request["temperature"]),
            repeat_penalty=float(request.get("repeat_penalty", 1.0)),
            frequency_penalty=float(request.get("frequency_penalty", 0.0)),
            presence_penalty=float(request.get("presence_penalty", 0.0)),
        )
        finish = "stop"
        try:
            for chunk in chunks:
                if self._cancel.is_set():
                    return "cancelled"
                choice = chunk["choices"][0]
                delta = choice.get("delta", {}).get("content")
                if delta:
                    self.send({"delta": delta})
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])
        finally:
            chunks.close()
        return finish


def _read_requests(requests: queue.Queue[dict[str, Any]], cancel: threading.Event) -> None:
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if isinstance(request, dict) and request.get("op") == "cancel":
            cancel.set()
        elif isinstance(request, dict):
            requests.put(request)
    os._exit(0)  # stdin closed: the parent is gone or done with us


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mnemo.agent.providers.model_process")
    parser.add_argument("--parent", type=int, default=0, help="exit when this process is gone")
    args = parser.parse_args(argv)
    die_with_parent(args.parent)
    # The protocol gets its own copy of stdout; fd 1 then points at stderr, so a stray print from a
    # library can never corrupt it.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    requests: queue.Queue[dict[str, Any]] = queue.Queue()
    cancel = threading.Event()
    threading.Thread(target=_read_requests, args=(requests, cancel), daemon=True).start()
    server = ModelServer(out, cancel)
    while True:
        server.handle(requests.get())


if __name__ == "__main__":
    sys.exit(main())

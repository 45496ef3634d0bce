"""Whether llama.cpp's optimised CPU kernels run on this machine, measured once and remembered.

llama.cpp repacks quantised weights into "extra buffer types" for the CPU's fastest kernels (AMX,
AVX-512, ...). On some machines CPUID advertises an instruction that then faults (AMX in a VM:
``tileloadd`` raises SIGILL) and the whole process dies. So before a model is loaded in a process
that must survive, a child process loads it with the default (optimised) buffer types and runs it
briefly; if the child dies or fails, the model is loaded with ``use_extra_bufts = False`` (plain
kernels, same results). The verdict is cached in ``<cache>/native-probe.json`` under the CPU's
identity (model name, flags, llama-cpp-python version and build), per model file.

The setting ``[agent] extra_buffer_types`` (or ``$MNEMO_EXTRA_BUFFER_TYPES``) forces "on" or "off".
Tests make the child crash with ``$MNEMO_PROBE_SIMULATE_CRASH`` = ``extra`` (only with extra buffer
types) or ``all``; nothing else reads it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger(__name__)

Mode = Literal["auto", "on", "off"]
Kind = Literal["chat", "embed"]
MODE_ENV = "MNEMO_EXTRA_BUFFER_TYPES"
SIMULATE_ENV = "MNEMO_PROBE_SIMULATE_CRASH"
CACHE_FILE = "native-probe.json"
PROBE_TIMEOUT_S = 120.0
SETTING_HINT = 'set [agent] extra_buffer_types = "off" in mnemo.toml (or MNEMO_EXTRA_BUFFER_TYPES=off)'

_probe_lock = threading.Lock()
_params_lock = threading.Lock()


class NativeModelError(RuntimeError):
    """The model cannot run on this machine at all, even with plain kernels (message says why)."""


@dataclass(frozen=True)
class ProbeRun:
    """One probe child: ``ok``, or how it ended (``signal`` name, exit code, timeout) and its last words."""

    ok: bool
    how: str
    detail: str = ""


# -- identity and cache ---------------------------------------------------------------------------


@functools.cache  # the CPU does not change under a running process
def _cpuinfo() -> tuple[str, str]:
    """(model name, flags) of the first CPU in /proc/cpuinfo; ("", "") where there is none."""
    name = flags = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not name:
                name = value.strip()
            elif key == "flags" and not flags:
                flags = " ".join(sorted(value.split()))
            if name and flags:
                break
    return name or platform.processor() or platform.machine(), flags


@functools.cache  # the libraries loaded here are the ones probed, even if rebuilt meanwhile
def _llama_build() -> str:
    """llama-cpp-python's version and a fingerprint of its shared libraries (a rebuild changes it)."""
    try:
        version = importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        version = "none"
    spec = importlib.util.find_spec("llama_cpp")
    libs: list[str] = []
    if spec is not None and spec.origin:
        lib_dir = Path(spec.origin).parent / "lib"
        with contextlib.suppress(OSError):
            libs = [f"{p.name}:{p.stat().st_size}" for p in sorted(lib_dir.glob("*.so*"))]
    return f"{version}|{hashlib.sha256(','.join(libs).encode()).hexdigest()[:12]}"


def cpu_identity() -> dict[str, str]:
    """What the verdict depends on: the CPU's model name and flags, the machine, the llama.cpp build."""
    name, flags = _cpuinfo()
    return {
        "cpu": name,
        "flags_sha256": hashlib.sha256(flags.encode()).hexdigest()[:16],
        "machine": platform.machine(),
        "llama_cpp": _llama_build(),
    }


def identity_key(identity: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cached_verdict(cache_dir: Path, model_key: str) -> bool | None:
    """The remembered verdict for this CPU and model, or None."""
    entry = _read_cache(cache_dir / CACHE_FILE).get(identity_key(cpu_identity()), {})
    verdict = entry.get("models", {}).get(model_key, {}) if isinstance(entry, dict) else {}
    value = verdict.get("extra_buffer_types") if isinstance(verdict, dict) else None
    return value if isinstance(value, bool) else None


def remember(cache_dir: Path, model_key: str, extra: bool, detail: str) -> None:
    """Store a verdict (atomically; a failure to write only costs a probe next time)."""
    path = cache_dir / CACHE_FILE
    identity = cpu_identity()
    data = _read_cache(path)
    entry = data.setdefault(identity_key(identity), {**identity, "models": {}})
    entry.setdefault("models", {})[model_key] = {
        "extra_buffer_types": extra,
        "detail": detail,
        "probed_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot remember the native probe's verdict in %s: %s", path, exc)


# -- probing --------------------------------------------------------------------------------------


def describe_exit(returncode: int) -> str:
    """How a child ended: "signal SIGILL" when killed by a signal, else "exit code N"."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


def probe_command(model: Path, kind: Kind, extra: bool) -> list[str]:
    return [sys.executable, "-m", "mnemo.native_probe", str(model), kind, "on" if extra else "off"]


def run_probe(argv: Sequence[str], timeout_s: float = PROBE_TIMEOUT_S) -> ProbeRun:
    """Run one probe child; never raises."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return ProbeRun(False, f"no answer in {timeout_s:.0f} s")
    except OSError as exc:
        return ProbeRun(False, f"cannot start: {exc}")
    tail = [line for line in done.stderr.splitlines() if line.strip()][-3:]
    return ProbeRun(done.returncode == 0, describe_exit(done.returncode), " | ".join(tail)[-400:])


def resolve_mode(mode: str) -> str:
    """The configured mode; "auto" defers to $MNEMO_EXTRA_BUFFER_TYPES when that says on or off."""
    if mode == "auto":
        env = os.environ.get(MODE_ENV, "").strip().lower()
        if env in ("on", "off"):
            return env
    return mode


def extra_buffer_types(
    model: Path,
    model_key: str,
    kind: Kind,
    cache_dir: Path,
    mode: str = "auto",
    *,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> bool:
    """Whether to load ``model`` with llama.cpp's extra (repacked, optimised) buffer types.

    "on"/"off" are obeyed; "auto" uses the cached verdict or probes (a second or two, once per machine
    and model). Raises NativeModelError when the model crashes the probe even with plain kernels."""
    mode = resolve_mode(mode)
    if mode in ("on", "off"):
        return mode == "on"
    with _probe_lock:
        verdict = cached_verdict(cache_dir, model_key)
        if verdict is not None:
            return verdict
        return _probe(model, model_key, kind, cache_dir, timeout_s)


def _probe(model: Path, model_key: str, kind: Kind, cache_dir: Path, timeout_s: float) -> bool:
    started = time.monotonic()
    optimised = run_probe(probe_command(model, kind, True), timeout_s)
    if optimised.ok:
        remember(cache_dir, model_key, True, f"ran in {time.monotonic() - started:.1f} s")
        return True
    plain = run_probe(probe_command(model, kind, False), timeout_s)
    if plain.ok:
        detail = f"with extra buffer types the probe ended by {optimised.how}; plain kernels run"
        log.warning("%s: %s (%s)", model.name, detail, optimised.detail or "no output")
        if not optimised.how.startswith("no answer"):  # a timeout on a busy machine proves nothing
            remember(cache_dir, model_key, False, detail)
        return False
    if plain.how.startswith("signal"):
        raise NativeModelError(
            f"the model {model.name} cannot run on this CPU: llama.cpp died by {plain.how} even without "
            f"extra buffer types ({plain.detail or 'no output'}); {_cpuinfo()[0]}. Use a portable build "
            "of llama-cpp-python (CMAKE_ARGS=-DGGML_NATIVE=OFF) or another provider"
        )
    # Not a CPU fault (a broken file, no llama-cpp-python): the real load reports the actual error.
    log.warning("%s: the native probe failed (%s: %s); not cached", model.name, plain.how, plain.detail)
    return False


# -- loading with or without extra buffer types ---------------------------------------------------


@contextlib.contextmanager
def model_params(extra: bool, *, one_sequence: bool = False) -> Iterator[None]:
    """Within this block, ``llama_cpp.Llama(...)`` loads with ``use_extra_bufts = extra``, and with
    ``one_sequence`` an embedding context holds one sequence.

    llama-cpp-python 0.3.x has no keyword for either: ``Llama.__init__`` starts from
    ``llama_model_default_params()``, and in embedding mode sets ``n_seq_max`` to
    ``llama_max_parallel_sequences()`` (256), for which llama.cpp reserves and touches an output row of
    n_vocab logits each at once (31 MB for MiniLM) although mnemo decodes one sequence at a time. Both
    functions are wrapped here (serialised: they are module attributes)."""
    from mnemo.embeddings.threads import brief_spinning

    brief_spinning()
    import llama_cpp.llama as llama_module

    native = llama_module.llama_cpp
    with _params_lock:
        original = native.llama_model_default_params
        original_sequences = native.llama_max_parallel_sequences

        def patched() -> Any:
            params = original()
            if hasattr(params, "use_extra_bufts"):
                params.use_extra_bufts = extra
            return params

        native.llama_model_default_params = patched
        if one_sequence:
            native.llama_max_parallel_sequences = lambda: 1
        try:
            yield
        finally:
            native.llama_model_default_params = original
            native.llama_max_parallel_sequences = original_sequences


# -- the probe child ------------------------------------------------------------------------------


def _simulated_crash(extra: bool) -> None:
    wanted = os.environ.get(SIMULATE_ENV, "")
    if wanted == "all" or (wanted == "extra" and extra):
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.kill(os.getpid(), signal.SIGILL)


def _exercise(model: Path, kind: str, extra: bool) -> None:
    from mnemo.embeddings.threads import brief_spinning

    brief_spinning()
    import llama_cpp

    with model_params(extra):
        llm = llama_cpp.Llama(
            model_path=str(model),
            n_ctx=128,
            n_threads=2,
            n_threads_batch=2,
            embedding=kind == "embed",
            n_gpu_layers=0,
            verbose=True,
        )
    if kind == "embed":
        llm.embed("mnemo probes this machine")
    else:
        llm.create_completion("The capital of France is", max_tokens=2, temperature=0.0)
    llm.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mnemo.native_probe")
    parser.add_argument("model", type=Path)
    parser.add_argument("kind", choices=["chat", "embed"])
    parser.add_argument("extra", choices=["on", "off"])
    args = parser.parse_args(argv)
    extra = args.extra == "on"
    _simulated_crash(extra)
    try:
        _exercise(args.model, args.kind, extra)
    except Exception as exc:  # the parent reads the reason from stderr
        print(f"probe failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The servers' glibc malloc settings: applied in a fresh process, never over the user's own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mnemo import server_malloc

APPLY = "from mnemo.server_malloc import tune_for_server; print(tune_for_server())"


def _run(env: dict[str, str]) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    done = subprocess.run(
        [sys.executable, "-c", APPLY], env={**clean, **env}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_server_process_gets_two_arenas_and_a_fixed_mmap_threshold() -> None:
    assert _run({}) == "True"


@pytest.mark.parametrize("name", ["MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"])
def test_the_users_own_malloc_settings_are_left_alone(name: str) -> None:
    value = "glibc.malloc.arena_max=4" if name == "GLIBC_TUNABLES" else "4"
    assert _run({name: value}) == "False"


def test_the_servers_apply_it_before_they_start() -> None:
    """Each long-lived entry point calls it (the settings only help before the threads allocate)."""
    import inspect

    from mnemo.cli import daemon, gateway
    from mnemo.lsp import setup

    for entry in (setup.serve, daemon.serve_until_idle, gateway.run_gateway):
        assert "tune_for_server()" in inspect.getsource(entry), entry.__qualname__
    assert server_malloc.ARENAS == 2

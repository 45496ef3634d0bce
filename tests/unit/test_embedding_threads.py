"""llama.cpp thread choice: no more threads than idle cores (issue 13, embedding under load)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mnemo.embeddings import local, threads
from mnemo.embeddings.local import LocalEmbedder
from mnemo.embeddings.threads import cgroup_cpu_limit, choose_threads, physical_cores


@pytest.mark.parametrize(
    ("cores", "load", "expected"),
    [
        (2, 0.0, 2),
        (2, 1.0, 2),  # busy but not oversubscribed: passive threads share, both cores pay (22 vs 15 chunks/s)
        (2, 3.9, 2),
        (2, 4.0, 1),  # two runnable processes a core: only the idle cores, at least one
        (2, 6.5, 1),  # the reported case: load 6-7 on 2 cores collapsed at 2 threads
        (8, 0.0, 8),
        (8, 7.6, 8),
        (8, 16.0, 1),
        (8, 40.0, 1),
        (1, 0.0, 1),
    ],
)
def test_threads_follow_idle_cores(cores: int, load: float, expected: int) -> None:
    assert choose_threads(cores, load) == expected


def test_only_our_share_of_a_big_machines_load_counts() -> None:
    # 2 of 64 CPUs: a machine-wide load of 60 puts ~1.9 on ours, 160 puts 5.
    assert choose_threads(2, 60.0, online=64) == 2
    assert choose_threads(2, 160.0, online=64) == 1
    assert choose_threads(2, 160.0) == 1
    assert choose_threads(2, 6.5, online=2) == 1


@pytest.mark.parametrize("load", [-3.0, math.nan, math.inf, -math.inf, 1e300])
def test_odd_loads_stay_in_bounds(load: float) -> None:
    for cores in (0, 1, 2, 7, 256):
        assert 1 <= choose_threads(cores, load) <= max(1, cores)


def test_bounded_over_a_grid() -> None:
    for cores in range(0, 33):
        previous = None
        for tenth in range(0, 800):
            n = choose_threads(cores, tenth / 10)
            assert 1 <= n <= max(1, cores)
            assert previous is None or n <= previous  # more load never means more threads
            previous = n


def _machine(monkeypatch: pytest.MonkeyPatch, cpus: int, load: float) -> None:
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: cpus)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(threads, "_CPU_SYSFS", Path("/nonexistent-sysfs"))
    monkeypatch.setattr(threads, "_CGROUP_CPU_MAX", Path("/nonexistent-cpu.max"))


def test_default_threads_on_a_busy_two_core_machine_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(monkeypatch, cpus=2, load=6.5)
    assert local.default_threads() == 1
    assert LocalEmbedder(None, Path("/nonexistent-models"))._threads == 1


def test_default_threads_on_a_quiet_machine_uses_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(monkeypatch, cpus=4, load=0.1)
    assert local.default_threads() == 4


def test_explicit_threads_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(monkeypatch, cpus=2, load=6.5)
    assert LocalEmbedder(None, Path("/nonexistent-models"), threads=2)._threads == 2


def test_no_load_average_means_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(monkeypatch, cpus=3, load=0.0)

    def no_loadavg() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(threads.os, "getloadavg", no_loadavg)
    assert local.default_threads() == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max 100000\n", None),
        ("150000 100000\n", 2),
        ("100000 100000", 1),
        ("5000 100000", 1),
        ("junk", None),
    ],
)
def test_cgroup_quota(tmp_path: Path, text: str, expected: int | None) -> None:
    path = tmp_path / "cpu.max"
    path.write_text(text)
    assert cgroup_cpu_limit(path) == expected
    assert cgroup_cpu_limit(tmp_path / "missing") is None


def test_a_cgroup_quota_caps_the_cores(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _machine(monkeypatch, cpus=8, load=0.0)
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    monkeypatch.setattr(threads, "_CGROUP_CPU_MAX", tmp_path / "cpu.max")
    assert local.default_threads() == 2


def test_smt_siblings_count_once(tmp_path: Path) -> None:
    for cpu, siblings in {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"}.items():
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "thread_siblings_list").write_text(siblings + "\n")
    assert physical_cores({0, 1, 2, 3}, tmp_path) == 2
    assert physical_cores({0, 2}, tmp_path) == 1
    assert physical_cores({0, 1, 5}, tmp_path) == 3  # cpu5 unknown: counted on its own
    assert physical_cores(set(), tmp_path) == 1


def _openmp_env_after_loading(setup: str) -> str:
    import subprocess
    import sys

    code = (
        "import os; os.environ.pop('OMP_WAIT_POLICY', None); os.environ.pop('GOMP_SPINCOUNT', None)\n"
        f"{setup}\n"
        "from mnemo.embeddings.local import _install_quiet_logging\n"
        "_install_quiet_logging()\n"
        "print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return out.stdout.strip()


def test_llama_cpp_is_loaded_with_brief_openmp_spinning_unless_the_user_chose() -> None:
    assert _openmp_env_after_loading("") == "None 1000"
    assert _openmp_env_after_loading("os.environ['OMP_WAIT_POLICY'] = 'PASSIVE'") == "PASSIVE None"
    assert _openmp_env_after_loading("os.environ['GOMP_SPINCOUNT'] = '5'") == "None 5"

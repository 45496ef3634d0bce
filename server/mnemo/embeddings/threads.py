"""How many CPU threads llama.cpp gets, and how they wait for each other.

llama.cpp splits every operation of a forward pass over its threads and then waits for all of them at a
barrier (~100 per forward pass; OpenMP). libgomp spins at a barrier by default (300,000 rounds), and when the
machine's other work leaves fewer idle cores than threads, a thread that is not scheduled holds up the others,
which spin on the CPU time it needs: throughput collapses instead of sharing the cores (MiniLM at 0.3-0.5
chunks/s at load 6-7 on 2 cores, against ~4-14 on a quiet machine; docs/benchmarks.md, "Embedding under load").
Sleeping at every barrier instead (``OMP_WAIT_POLICY=PASSIVE``) removes the collapse but costs a wake-up per
barrier: a 6-token query took 8-9 ms instead of 2-3. So threads spin briefly, then sleep
(:func:`brief_spinning`, ``GOMP_SPINCOUNT=1000``: a few microseconds, enough for a partner that is running,
too short to burn a descheduled partner's slice), and every physical core we may run on gets a thread until the
load reaches :data:`BUSY_LOAD_PER_CORE`; above it, only the idle cores, never fewer than one.
``embedding.threads`` / ``agent.threads`` in mnemo.toml override the choice.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

_CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
_CPU_SYSFS = Path("/sys/devices/system/cpu")


BUSY_LOAD_PER_CORE = 2.0
"""Below this load per core every core gets a thread; at or above it, only the idle cores (at least one).
Measured on 2 cores with passive waiting (docs/benchmarks.md, "Embedding under load"): quiet, 2 threads
22.2 chunks/s against 14.8 for one; at load ~3.5, 6.1 against 5.8; at load ~13, 4.9 against 5.9."""


SPIN_COUNT = "1000"
"""libgomp's spin rounds at a barrier before a thread sleeps (its own default is 300,000, ~0.1-1 ms)."""


def brief_spinning() -> None:
    """Call before llama.cpp is first imported in a process: its OpenMP threads then spin only briefly at a
    barrier before sleeping (``GOMP_SPINCOUNT``, read once when the library loads). A user's
    ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` wins. Threads are chosen once per model load, so a long-running
    server that started on a quiet machine must not collapse when the machine gets busy later (2 threads on
    2 busy cores: 0.24 chunks/s spinning, 2.4 sleeping at once); a short spin keeps that, and keeps a short
    query's forward pass from paying a wake-up at every barrier (docs/benchmarks.md, "Embedding under
    load")."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)


def choose_threads(cores: int, load: float, online: int | None = None) -> int:
    """Threads for ``cores`` usable cores when the one-minute load average of the machine is ``load``.

    ``online`` is the number of CPUs the load average counts (all of the machine's); when we may use fewer of
    them, only our share of the load is taken to fall on our cores. The result is in ``[1, max(1, cores)]``
    for any input (a negative, NaN or infinite load included).
    """
    cores = max(1, int(cores))
    if not math.isfinite(load) or load <= 0:
        return cores
    if online is not None and online > cores:
        load = load * cores / online
    if load < BUSY_LOAD_PER_CORE * cores:  # threads soon sleep at barriers (brief_spinning): all cores pay
        return cores
    free = cores - load
    return max(1, min(cores, math.floor(free + 0.5)))


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on (its affinity), or all of them where that is unknown."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def cgroup_cpu_limit(path: Path | None = None) -> int | None:
    """Whole CPUs allowed by a cgroup v2 quota (``cpu.max``, rounded up), or None without a quota."""
    try:
        quota, period = (path or _CGROUP_CPU_MAX).read_text().split()[:2]
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None


def physical_cores(cpus: set[int], sysfs: Path | None = None) -> int:
    """Physical cores among ``cpus``: SMT siblings count once (sysfs ``thread_siblings_list``)."""
    sysfs = sysfs or _CPU_SYSFS
    groups: set[str] = set()
    for cpu in cpus:
        try:
            groups.add((sysfs / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text().strip())
        except OSError:
            groups.add(f"cpu{cpu}")
    return max(1, len(groups))


def usable_cores() -> int:
    """Physical cores this process may use: affinity, SMT siblings counted once, a cgroup quota applied."""
    cores = physical_cores(allowed_cpus())
    limit = cgroup_cpu_limit()
    return min(cores, limit) if limit is not None else cores


def load_average() -> float:
    """The machine's one-minute load average (0.0 where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def default_threads() -> int:
    """llama.cpp threads for a model loaded now: :func:`choose_threads` of this machine's cores and load."""
    return choose_threads(usable_cores(), load_average(), os.cpu_count())

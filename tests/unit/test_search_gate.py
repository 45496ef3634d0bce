"""Searches let in at once, the others in order of arrival (mnemo.memory.search_gate; issue 17)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo.embeddings import threads
from mnemo.errors import SearchCancelled
from mnemo.memory import search_gate
from mnemo.memory.search_gate import SearchGate, search_slots

BOUND_S = 10.0


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def _queue(gate: SearchGate, runs: list[Callable[[], None]]) -> list[threading.Thread]:
    """A thread per run, each started once the one before waits at the gate (the gate held meanwhile)."""
    threads = []
    for run in runs:
        before = gate.waiting
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        _wait_until(lambda before=before: gate.waiting == before + 1)  # type: ignore[misc]
        threads.append(thread)
    return threads


def _entering(gate: SearchGate, name: str, entered: list[str]) -> Callable[[], None]:
    """A search that records its entry and leaves at once."""

    def run() -> None:
        with gate:
            entered.append(name)

    return run


def test_at_most_slots_inside_at_once() -> None:
    gate = SearchGate(2)
    inside, most, lock = [0], [0], threading.Lock()

    def search() -> None:
        for _ in range(20):
            with gate:
                with lock:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.001)
                with lock:
                    inside[0] -= 1

    threads = [threading.Thread(target=search, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND_S)
    assert not any(thread.is_alive() for thread in threads)
    assert most[0] == 2 and inside[0] == 0


def test_waiting_searches_come_in_order_of_arrival_and_no_newcomer_jumps_the_queue() -> None:
    gate = SearchGate(1)
    entered: list[str] = []
    gate.__enter__()  # a search inside
    threads = _queue(gate, [_entering(gate, name, entered) for name in ("first", "second", "third")])
    # The search inside ends and at once asks again, as a client searching in a loop does: it queues
    # behind the three (a plain semaphore let it straight back in, and the others waited for its whole
    # run: 8 threads' p95 went over 100 ms).
    gate.__exit__(None, None, None)
    with gate:
        entered.append("again")
    for thread in threads:
        thread.join(BOUND_S)
    assert entered == ["first", "second", "third", "again"]
    with gate:  # every place was given back
        pass
    assert gate.waiting == 0


def test_a_waiter_interrupted_gives_its_turn_back(monkeypatch: pytest.MonkeyPatch) -> None:
    class Interrupted(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            raise KeyboardInterrupt

    gate = SearchGate(1)
    gate.__enter__()
    monkeypatch.setattr(search_gate.threading, "Event", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        gate.__enter__()
    monkeypatch.undo()
    assert gate.waiting == 0
    gate.__exit__(None, None, None)
    entered: list[str] = []
    with gate:  # the place is free again, not handed to the search that gave up
        entered.append("next")
    assert entered == ["next"]


def test_slots_from_the_setting_or_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    assert search_slots(3) == 3
    monkeypatch.setattr(threads, "allowed_cpus", lambda: set(range(64)))
    monkeypatch.setattr(threads, "physical_cores", lambda cpus: len(cpus))
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: None)
    assert search_slots(0) == 64
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: 6)  # a container's quota on a large host
    assert search_slots(0) == 6
    monkeypatch.setattr(threads, "allowed_cpus", lambda: {0})
    assert search_slots(0) == search_gate.MIN_SLOTS
    with pytest.raises(ValueError, match="at least one slot"):
        SearchGate(0)


def test_the_memory_service_lets_in_as_many_searches_as_the_setting(
    make_workspace: Callable[..., Path], services_factory: Callable[..., Any]
) -> None:
    notes = {f"memory/topic-{i}.md": f"# Topic {i}\n\nThe quokka {i} likes deployments.\n" for i in range(20)}
    root = make_workspace(notes, toml="[search]\nsearches_at_once = 1\n")
    memory = services_factory(root).memory
    memory.sync()
    assert memory.search_gate.slots == 1
    reading = memory.indexer.reading
    inside, most, lock = [0], [0], threading.Lock()

    def counted(*args: Any, **kwargs: Any) -> Any:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.005)  # long enough for the other threads to try
            return reading(*args, **kwargs)
        finally:
            with lock:
                inside[0] -= 1

    memory.indexer.reading = counted
    found: dict[int, list[str]] = {}

    def search(i: int) -> None:
        found[i] = [hit.path for hit in memory.search(f"quokka {i}", record=False).results]

    threads = [threading.Thread(target=search, args=(i,), daemon=True) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND_S * 3)
    assert not any(thread.is_alive() for thread in threads)
    assert most[0] == 1
    assert all(found[i][0] == f"memory/topic-{i}.md" for i in range(6)), found


def test_the_default_is_the_cores(
    make_workspace: Callable[..., Path], services_factory: Callable[..., Any]
) -> None:
    memory = services_factory(make_workspace({"MEMORY.md": "# Memory\n"})).memory
    assert memory.search_gate.slots == search_slots(0) >= search_gate.MIN_SLOTS


def test_a_search_cancelled_while_it_waits_does_not_run(
    make_workspace: Callable[..., Path], services_factory: Callable[..., Any]
) -> None:
    """An editor's search-as-you-type cancels each search the next keystroke replaces: one still waiting
    for its turn is dropped, not run after the others."""
    root = make_workspace(
        {"MEMORY.md": "# Memory\n\nThe quokka likes deployments.\n"}, toml="[search]\nsearches_at_once = 1\n"
    )
    memory = services_factory(root).memory
    memory.sync()
    reading = memory.indexer.reading
    reads = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads[0] += 1
        return reading(*args, **kwargs)

    memory.indexer.reading = counted
    outcomes: dict[str, object] = {}

    def search(name: str, cancelled: threading.Event) -> None:
        try:
            outcomes[name] = memory.search("quokka", record=False, cancelled=cancelled).results[0].path
        except SearchCancelled as exc:
            outcomes[name] = exc

    memory.search_gate.__enter__()  # a search inside
    stale, wanted = threading.Event(), threading.Event()
    threads = _queue(
        memory.search_gate,
        [functools.partial(search, "stale", stale), functools.partial(search, "wanted", wanted)],
    )
    stale.set()
    memory.search_gate.__exit__(None, None, None)
    for thread in threads:
        thread.join(BOUND_S)
    assert isinstance(outcomes["stale"], SearchCancelled)
    assert outcomes["wanted"] == "MEMORY.md"
    assert reads[0] == 1  # only the wanted search read the index
    assert memory.search_gate.waiting == 0

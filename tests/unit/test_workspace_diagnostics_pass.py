"""The workspace diagnostics pass runs one at a time, however often the index listeners ask for it."""

from __future__ import annotations

import asyncio

import pytest

from mnemo.lsp.handlers.diagnostics import OnePassAtATime


async def test_passes_asked_for_during_a_pass_run_once_after_it_never_beside_it() -> None:
    """A server's start fired the index listeners two or three times (after the sync, when the vectors
    were ready): each started a pass over every memory file beside the others, holding every chunk's
    vector (a 372 MB peak at 2,000 notes)."""
    running = 0
    most = 0
    passes = 0
    release = asyncio.Event()

    async def work() -> None:
        nonlocal running, most, passes
        passes += 1
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1

    one_pass = OnePassAtATime(work)
    first = asyncio.ensure_future(one_pass())
    await asyncio.sleep(0)
    asked_meanwhile = [asyncio.ensure_future(one_pass()) for _ in range(3)]
    await asyncio.gather(*asked_meanwhile)  # they return at once: the running pass will go again
    assert passes == 1
    release.set()
    await first
    assert passes == 2  # one more pass for the three requests, after the first
    assert most == 1
    await one_pass()  # asked when idle: a pass of its own
    assert passes == 3


async def test_a_failed_pass_does_not_block_the_next() -> None:
    calls = 0

    async def work() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("the index went away")

    one_pass = OnePassAtATime(work)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await one_pass()
    assert calls == 2

"""The workspace diagnostics pass runs one at a time, however often the index listeners ask for it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import SimpleNamespace as NS
from typing import Any

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


async def _until(done: Callable[[], bool]) -> None:
    for _ in range(3000):
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def test_an_older_texts_diagnostics_never_overwrite_a_newer_ones() -> None:
    """Two publishes of one document overlap when the first waits for the index (up to 30 s while a
    sync holds the writer): the older text's diagnostics, finished last, replaced the newer ones, and
    the editor showed problems of text that was gone until the next edit."""
    from mnemo.lsp.handlers import diagnostics

    uri = "file:///ws/memory/a.md"
    document = NS(source="v1 text", version=1)
    published: list[tuple[int, str]] = []
    first_started, newer_published, first_returned = threading.Event(), threading.Event(), threading.Event()

    def diagnose_buffer(rel: str, text: str) -> list[object]:
        if text == "v1 text":  # the first publish: still diagnosing when the buffer changes
            first_started.set()
            assert newer_published.wait(30)
            first_returned.set()
        return [
            NS(
                start=(0, 0),
                end=(0, 1),
                message=f"in {text}",
                severity="warning",
                code="x",
                related=[],
                kind="k",
                data={},
            )
        ]

    def publish(params: Any) -> None:
        published.append((params.version, params.diagnostics[0].message))
        if params.version == 2:
            newer_published.set()

    server = NS(
        core=NS(
            workspace=NS(rel_from_uri=lambda uri: "memory/a.md", uri=lambda rel: uri),
            editor=NS(diagnose_buffer=diagnose_buffer),
            settings=NS(server=NS(debounce_ms=1)),
        ),
        workspace=NS(get_text_document=lambda uri: document),
        text_document_publish_diagnostics=publish,
        document_listeners=[],
        index_listeners=[],
    )
    diagnostics.register(server)
    schedule = server.document_listeners[0]
    schedule(uri)  # opened at version 1
    await _until(first_started.is_set)
    document.source, document.version = "v2 text", 2
    schedule(uri)  # changed to version 2
    await _until(first_returned.is_set)
    await asyncio.sleep(0.2)  # the first publish's last step
    assert published == [(2, "in v2 text")], published

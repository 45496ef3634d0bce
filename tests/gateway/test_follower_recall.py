"""A gateway that follows (the editor writes the index) recalls through the writer, like its RPC front.

Before, ``Services.agent`` was built on the process's own ``MemoryService`` while only ``memory.search``
went through the shared memory: a follower gateway's automatic recall searched an index it does not hold.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mnemo.services import Services, build_services
from tests.fake_chat_endpoint import Endpoint, agent_toml, chat_endpoint

from .conftest import TOKEN, login
from .test_gateway_process import KEYWORD_TOML, _env

NOTE = "# Birds\n\nA zebrafinch nests in the hedge behind the shed.\n"


def _answer(messages: list[dict[str, Any]]) -> tuple[str, str]:
    return "It nests in the hedge.", "stop"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with chat_endpoint(_answer) as found:
        yield found


@pytest.fixture
def editor(
    make_workspace: Any, sample_notes: dict[str, str | bytes], endpoint: Endpoint
) -> Iterator[Services]:
    """The editor's side, in this process: it holds the writer lease and alone indexed the new note."""
    root = make_workspace(sample_notes, toml=KEYWORD_TOML + agent_toml(endpoint.url))
    services = build_services(root)
    shared = services.share_index("editor")
    assert shared.start() and shared.is_writer
    (root / "memory" / "birds.md").write_text(NOTE, encoding="utf-8")
    services.memory.sync()
    yield services
    services.close()


@pytest.fixture
def follower_gateway(editor: Services, tmp_path: Path) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "gateway", "-w", str(editor.workspace.root), "--port", "0"],
        env=_env(tmp_path, MNEMO_GATEWAY_TOKEN=TOKEN),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    url, lines = "", []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not url:
        line = proc.stderr.readline()
        lines.append(line)
        found = re.search(r"(ws://\S+/rpc)", line)
        url = found.group(1) if found else url
        if not line and proc.poll() is not None:
            break
    assert url, "the gateway did not start:\n" + "".join(lines)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_a_follower_gateways_agent_recalls_what_only_the_editor_indexed(
    follower_gateway: str, endpoint: Endpoint
) -> None:
    client = await login(follower_gateway)
    try:
        status = await client.status()
        assert status["memory"]["writer"] == "another process"  # the gateway follows the editor
        reply = await client.chat.send(text="Where does the zebrafinch nest?", peer="ana", stream=False)
    finally:
        await client.close()
    recalled = [c for c in reply["citations"] if c["origin"] == "recall"]
    assert [c["path"] for c in recalled] == ["memory/birds.md"], reply
    system = endpoint.requests[-1]["messages"][0]["content"]
    assert "zebrafinch nests in the hedge" in system and "automatic recall skipped" not in str(reply)


def test_a_followers_internal_search_is_not_counted_by_the_writer(editor: Services) -> None:
    """``record=False`` (the flush guard's duplicate check) crosses the process boundary too."""
    follower_services = build_services(editor.workspace.root)
    follower = follower_services.share_index("gateway")
    try:
        assert not follower.start()  # the editor holds the lease
        assert follower_services.process_memory is follower

        def recalled() -> int:
            return sum(lens.times_retrieved for lens in editor.editor.lenses("memory/birds.md"))

        hits = follower.search("zebrafinch hedge", record=False).results
        assert [h.path for h in hits][:1] == ["memory/birds.md"] and recalled() == 0
        follower.search("zebrafinch hedge")
        assert recalled() == 1
    finally:
        follower_services.close()


def test_share_index_after_the_agent_is_refused(editor: Services) -> None:
    services = build_services(editor.workspace.root)
    try:
        assert services.process_memory is services.memory
        services.agent  # noqa: B018 - built on its own memory
        with pytest.raises(RuntimeError, match="before the agent"):
            services.share_index("gateway")
    finally:
        services.close()

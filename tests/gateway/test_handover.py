"""A gateway (or daemon) that yields the index to an editor's server opens nothing again until it takes
the lease back.

Before, ``release_index`` only closed the store: a sync already on its way (the gateway's start-up sync,
which loads the model first, or its periodic one) found no store and opened the index again, as a
follower. The editor's own sync then failed with IndexBusy until the gateway exited.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mnemo.cli.gateway import _quiet_sync
from mnemo.errors import IndexUnavailable
from mnemo.services import Services, build_services

from .test_gateway_process import KEYWORD_TOML


@pytest.fixture
def root(make_workspace: Any, sample_notes: dict[str, str | bytes]) -> Path:
    found: Path = make_workspace(sample_notes, toml=KEYWORD_TOML)
    return found


@pytest.fixture
def gateway(root: Path) -> Iterator[Services]:
    services = build_services(root)
    yield services
    services.close()


def test_a_writer_that_yielded_opens_nothing_until_it_takes_the_lease_back(gateway: Services) -> None:
    shared = gateway.share_index("gateway")
    assert shared.start() and gateway.memory.sync().files_seen > 0
    shared.release()  # what the editor's "yield" asks of a gateway
    memory = gateway.memory
    assert memory.indexer.store is None

    assert shared.sync_if_writer() is None  # the periodic sync: nothing to do as a follower
    _quiet_sync(shared)  # the start-up sync, ending after the yield
    with pytest.raises(IndexUnavailable, match="handed the index"):
        memory.sync()
    with pytest.raises(IndexUnavailable, match="handed the index"):
        memory.ensure_open()
    assert memory.indexer.store is None, "a released index was opened again"
    assert memory.index_state.state == "released"

    assert shared.try_acquire()  # the editor went away: this process writes again
    assert memory.sync().files_seen > 0 and memory.indexer.store is not None
    shared.release()


def test_a_search_that_finds_the_index_handed_over_asks_the_new_writer(root: Path, gateway: Services) -> None:
    shared = gateway.share_index("gateway")
    assert shared.start() and gateway.memory.sync().files_seen > 0
    editor_services = build_services(root)
    editor = editor_services.share_index("editor")
    local_search = gateway.memory.search

    def handed_over_on_the_way(*args: Any, **kwargs: Any) -> Any:
        shared.release()  # the yield lands between the writer check and the local search
        assert editor.start() and editor_services.memory.sync().files_seen > 0
        return local_search(*args, **kwargs)

    gateway.memory.search = handed_over_on_the_way  # type: ignore[method-assign]
    try:
        found = shared.search("billing database")
        assert found.results, "the search was not answered by the new writer"
        assert not shared.is_writer and editor.is_writer
        assert gateway.memory.indexer.store is None, "the follower opened the index again"
    finally:
        editor.release()
        editor_services.close()

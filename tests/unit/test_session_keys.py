"""agent/session_keys.py: the key the gateway's router builds is the key the archive reads back."""

from __future__ import annotations

import pytest

from mnemo.agent.session_keys import (
    Origin,
    dm_key,
    gateway_base,
    group_key,
    parse_session_key,
    session_id_for,
)


@pytest.mark.parametrize(
    ("key", "origin"),
    [
        (dm_key("main", "per-channel-peer", "slack", "T1", "U:2"), Origin("slack", peer="U:2", account="T1")),
        (dm_key("main", "per-peer", "slack", "T1", "U2"), Origin("all", peer="U2")),
        (dm_key("main", "main", "slack", "T1", "U2"), Origin("all")),
        (group_key("main", "discord", "bot", "G7"), Origin("discord", group="G7", account="bot")),
        (
            group_key("main", "discord", "bot", "G7", "th9"),
            Origin("discord", group="G7", account="bot", thread="th9"),
        ),
    ],
)
def test_a_built_key_reads_back_as_its_origin(key: str, origin: Origin) -> None:
    got = parse_session_key(key)
    assert (got.channel, got.peer, got.group, got.account, got.thread) == (
        origin.channel,
        origin.peer,
        origin.group,
        origin.account,
        origin.thread,
    )
    assert got.agent == "main" and got.session_key == key


def test_transcript_ids_name_the_conversation_across_generations_and_resets() -> None:
    key = dm_key("main", "per-channel-peer", "slack", "T1", "U2")
    first, later = session_id_for(key), session_id_for(key, 3)
    assert first != later and gateway_base(first) == gateway_base(later) is not None
    assert gateway_base(later + "-reset-120000") == gateway_base(first)
    assert gateway_base("2026-11-20-101010-abc123") is None  # the editor's sessions

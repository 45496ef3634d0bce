"""The routing table, session keys and reset policies (pure logic, no sockets)."""

from __future__ import annotations

from datetime import datetime

from mnemo.agent.session_keys import session_id_for
from mnemo.gateway.routing import InboundMessage, Router
from mnemo.gateway.session_table import SessionTable, is_stale
from mnemo.gateway.settings import SessionPolicy, gateway_settings_from_dict

RAW = {
    "agents": [
        {"id": "main", "default": True},
        {"id": "work"},
        {"id": "family"},
        {"id": "ops"},
        {"id": "support"},
        {"id": "bot"},
        {"id": "vip"},
    ],
    "routes": [
        {"agent": "bot", "channel": "telegram"},
        {"agent": "support", "channel": "slack", "account": "helpdesk"},
        {"agent": "work", "team": "T-ACME"},
        {"agent": "family", "guild": "G-HOME"},
        {"agent": "ops", "parent_thread": "C-INCIDENTS"},
        {"agent": "vip", "peer": "U-BOSS"},
    ],
}


def router() -> Router:
    settings, problems = gateway_settings_from_dict(RAW, {})
    assert problems == []
    return Router(settings)


def msg(**fields: object) -> InboundMessage:
    base: dict[str, object] = {"channel": "slack", "text": "hi", "peer": "U-1"}
    base.update(fields)
    return InboundMessage(**base)  # type: ignore[arg-type]


def test_routes_are_tried_from_peer_to_channel_then_the_default() -> None:
    r = router()
    everything = {"team": "T-ACME", "guild": "G-HOME", "parent_thread": "C-INCIDENTS", "account": "helpdesk"}
    assert r.resolve(msg(peer="U-BOSS", **everything)).agent == "vip"
    assert r.resolve(msg(**everything)).matched_by == "parent_thread"
    assert r.resolve(msg(team="T-ACME", guild="G-HOME", account="helpdesk")).agent == "family"
    assert r.resolve(msg(team="T-ACME", account="helpdesk")).agent == "work"
    assert r.resolve(msg(account="helpdesk")).agent == "support"
    assert r.resolve(msg(channel="telegram")).matched_by == "channel"
    fallback = r.resolve(msg(channel="webhook"))
    assert (fallback.agent, fallback.matched_by) == ("main", "default")


def test_a_thread_matches_a_parent_thread_route_by_its_own_id_when_it_has_no_parent() -> None:
    assert router().resolve(msg(thread="C-INCIDENTS")).agent == "ops"


def test_session_keys_by_dm_scope_and_group_thread() -> None:
    for scope, expected in (
        ("main", "agent:main:main"),
        ("per-peer", "agent:main:dm:U-1"),
        ("per-channel-peer", "agent:main:slack:default:dm:U-1"),
    ):
        settings, _ = gateway_settings_from_dict({"session": {"dm_scope": scope}}, {})
        assert Router(settings).resolve(msg()).session_key == expected
    group = router().resolve(msg(channel="webhook", group=True, group_id="C-9", thread="t1"))
    assert group.session_key == "agent:main:webhook:default:group:C-9:thread:t1"
    assert group.kind == "group"


def test_session_ids_are_safe_file_names_and_distinct() -> None:
    a, b = session_id_for("agent:main:slack:x:dm:U/../1"), session_id_for("agent:main:slack:x:dm:U-..-1")
    assert "/" not in a and a != b
    assert session_id_for("k", 1) != session_id_for("k", 0)


def test_bad_routes_and_agents_are_reported_and_skipped() -> None:
    settings, problems = gateway_settings_from_dict(
        {
            "routes": [
                {"agent": "nobody", "peer": "x"},
                {"agent": "main"},
                {"agent": "main", "colour": "red", "peer": "p"},
            ],
            "session": {"reset": "hourly"},
            "port": "x",
        },
        {},
    )
    text = "\n".join(problems)
    assert "unknown agent 'nobody'" in text and "matches nothing" in text and "colour" in text
    assert "hourly" in text and "gateway.port" in text
    assert len(settings.routes) == 1
    assert settings.agent("main").sessions.reset == "never"


def test_reset_policies() -> None:
    day = datetime(2026, 11, 30, 10, 0).timestamp()
    daily = SessionPolicy(reset="daily", reset_hour=4)
    assert is_stale(daily, datetime(2026, 11, 30, 3, 59).timestamp(), day)
    assert not is_stale(daily, datetime(2026, 11, 30, 4, 1).timestamp(), day)
    idle = SessionPolicy(reset="idle", idle_minutes=30)
    assert is_stale(idle, day - 31 * 60, day) and not is_stale(idle, day - 29 * 60, day)
    assert not is_stale(SessionPolicy(), 0, day)


def test_session_table_reuses_resets_and_survives_a_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "gateway-sessions.json"
    table = SessionTable(path)
    policy = SessionPolicy(reset="idle", idle_minutes=10)
    first, fresh = table.use("k", "main", "private", policy, 1000.0)
    again, fresh2 = table.use("k", "main", "private", policy, 1100.0)
    assert (first.session_id, fresh, fresh2) == (again.session_id, False, False)
    later, fresh3 = table.use("k", "main", "private", policy, 1100.0 + 11 * 60)
    assert fresh3 and later.generation == 1
    assert SessionTable(path).get("k").generation == 1  # type: ignore[union-attr]
    path.write_text("{not json", encoding="utf-8")
    assert SessionTable(path).get("k") is None  # a damaged table starts over, it does not crash

"""The session archive through a real gateway: chats on a channel and in a group, archived by the admin's
``sessions.archive`` (named by the gateway's session table), refused to users; the daily run's hook."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from jsonrpc_base import ProtocolError

from mnemo.agent.archive import SessionArchiver
from mnemo.config import SessionsSettings
from mnemo.gateway.rpc import FORBIDDEN, INVALID_PARAMS
from mnemo.services import gateway_origins

from .conftest import PASSWORD, login


def last_month() -> str:
    return (date.today().replace(day=1) - timedelta(days=1)).strftime("%Y-%m")


def move_to_last_month(root: Path) -> list[str]:
    """Rewrite every transcript's timestamps into last month (a finished one); returns the ids."""
    month = last_month()
    ids = []
    for path in sorted((root / "sessions").glob("gw-*.jsonl")):
        events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        for i, event in enumerate(events):
            event["ts"] = f"{month}-05T10:{i:02d}:00.000000Z"
        path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
        ids.append(path.stem)
    return ids


async def test_admins_archive_gateway_conversations_by_channel_and_peer(start_gateway: Any) -> None:
    gw = await start_gateway()
    table = gw.root / ".mnemo" / "gateway-sessions.json"
    archiver = SessionArchiver(
        gw.root, gw.root / ".mnemo", SessionsSettings(), origins=lambda: gateway_origins(table)
    )
    gw.gateway.core.archive = lambda month, dry_run: archiver.run(month, dry_run=dry_run)
    admin = await login(gw.url)
    user = await login(gw.url, "password", PASSWORD)
    try:
        await admin.chat.send(text="the greenhouse heater needs a new thermostat", peer="alice")
        await admin.chat.send(text="the greenhouse thermostat arrives friday", peer="alice")
        await admin.chat.send(text="team lunch moves to thursday", group=True, groupId="crew")
        assert len(move_to_last_month(gw.root)) == 2

        with pytest.raises(ProtocolError) as exc:
            await user.sessions.archive()
        assert int(exc.value.args[0]) == FORBIDDEN
        with pytest.raises(ProtocolError) as exc:
            await admin.sessions.archive(month="last month")
        assert int(exc.value.args[0]) == INVALID_PARAMS

        dry = await admin.sessions.archive(dryRun=True)
        assert dry["dryRun"] is True and len(dry["months"]) == 2
        assert not any((gw.root / m["path"]).exists() for m in dry["months"])

        done = await admin.sessions.archive()
        by_context = {m["context"]: m for m in done["months"]}
        private, group = by_context["private"], by_context["group"]
        assert (private["channel"], private["peer"], private["messages"]) == ("webchat", "alice", 4)
        assert (group["channel"], group["peer"]) == ("webchat", "crew")
        text = (gw.root / private["path"]).read_text(encoding="utf-8")
        assert private["path"].startswith("sessions/private-main-webchat-default-dm-alice-")
        assert 'session_key: "agent:main:webchat:default:dm:alice"' in text
        assert (
            f"month: {last_month()}" in text and "user: the greenhouse heater needs a new thermostat" in text
        )
        assert "group" in group["path"] and "lunch" in (gw.root / group["path"]).read_text(encoding="utf-8")

        again = await admin.sessions.archive()
        assert again["months"] == []  # summarised once
    finally:
        await admin.close()
        await user.close()


def test_the_gateways_daily_hook_runs_the_archive_once_a_day(
    sample_workspace: Path, services_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemo.cli.gateway import _DailyArchive

    monkeypatch.setenv("MNEMO_AGENT_AUTO_PORTS", "")  # no loopback probe: the bundled model, never run
    month = last_month()
    sessions = sample_workspace / "sessions"
    sessions.mkdir()
    events = [
        {"type": "session", "text": "", "ts": f"{month}-02T08:00:00Z", "seq": 0, "kind": "private"},
        {"type": "user", "text": "plan the attic insulation", "ts": f"{month}-02T08:00:00Z", "seq": 1},
    ]
    (sessions / "2026-01-01-000000-aaaaaa.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in events), encoding="utf-8"
    )
    services = services_factory(sample_workspace)
    daily = _DailyArchive(services)
    daily()
    archive = sessions / "private-editor" / f"{month}.md"
    assert archive.exists() and 'summary: "extractive"' in archive.read_text(encoding="utf-8")
    found = services.memory.search("attic insulation", sources=["archive"])
    assert [h.path for h in found.results] == [f"sessions/private-editor/{month}.md"]  # indexed by the run
    archive.unlink()
    daily()  # the same day: nothing runs (a deleted archive stays deleted anyway)
    assert not archive.exists()
    state = json.loads((sample_workspace / ".mnemo" / "archive-state.json").read_text(encoding="utf-8"))
    assert state["lastRun"] == datetime.now(UTC).strftime("%Y-%m-%d")

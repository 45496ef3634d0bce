"""The session archive: finished months summarised once per conversation key, excerpts that quote and link
the turns, consent for conversations marked private, raw logs optional, a search source of its own
(real DuckDB), deletable alone, and group and private archives kept apart in chat contexts."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mnemo.agent.archive import ArchiveBusy, SessionArchiver
from mnemo.agent.archive_summary import Turn, excerpts, model_summary
from mnemo.agent.context import ContextBuilder
from mnemo.agent.providers import ChatMessage, ScriptedProvider
from mnemo.agent.session_keys import parse_session_key
from mnemo.agent.sessions import SessionStore
from mnemo.agent.tools import ToolBox
from mnemo.config import SessionsSettings
from mnemo.memory.limits import InvalidInput
from mnemo.workspace.layout import FileKind, Workspace, archive_context, readable_in

NOW = datetime(2026, 11, 15, 9, 0, tzinfo=UTC)
EDITOR_ID = "2026-10-03-120000-abc123"
DM_KEY = "agent:main:telegram:default:dm:4242"
DM_ID = "gw-main-telegram-default-dm-4242-0123456789"
GROUP_KEY = "agent:main:slack:acme:group:C-OPS"
GROUP_ID = "gw-main-slack-acme-group-C-OPS-abcdef0123"
EDITOR_TURNS = [
    ("2026-10-03T12:00:00.000000Z", "user", "Which database should billing use, postgres or mysql?"),
    ("2026-10-03T12:00:05.000000Z", "assistant", "Postgres, because of row-level security."),
    ("2026-10-03T12:01:00.000000Z", "user", "thanks"),
    ("2026-10-10T08:00:00.000000Z", "user", "Set up the postgres replica for billing in Frankfurt"),
    ("2026-10-10T08:00:03.000000Z", "assistant", "Done: the replica runs in Frankfurt."),
    ("2026-11-02T10:00:00.000000Z", "user", "November: what about the billing postgres backups?"),
]
DM_TURNS = [
    ("2026-10-20T19:00:00.000000Z", "user", "Remind me that the tomato seedlings need repotting"),
    ("2026-10-20T19:00:02.000000Z", "assistant", "Noted: repot the tomato seedlings."),
]
GROUP_TURNS = [
    ("2026-10-21T09:00:00.000000Z", "user", "The ops rota for the incident pager changes next week"),
    ("2026-10-21T09:00:02.000000Z", "assistant", "Understood, the pager rota changes."),
]


def transcript(
    root: Path, session_id: str, kind: str, turns: Sequence[tuple[str, str, str]], **flags: bool
) -> Path:
    """A transcript as SessionStore writes it, with chosen timestamps."""
    events: list[dict[str, Any]] = [
        {"type": "session", "text": "", "ts": turns[0][0], "seq": 0, "kind": kind}
    ]
    for ts, role, text in turns:
        events.append({"type": role, "text": text, "ts": ts, "seq": len(events)})
    if flags:
        events.append({"type": "flags", "text": "", "ts": turns[-1][0], "seq": len(events), **flags})
    path = root / "sessions" / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def archiver(root: Path, **settings: Any) -> SessionArchiver:
    origins = {DM_ID: DM_KEY, GROUP_ID: GROUP_KEY}
    return SessionArchiver(root, root / ".mnemo", SessionsSettings(**settings), origins=lambda: origins)


def three_conversations(root: Path) -> None:
    transcript(root, EDITOR_ID, "private", EDITOR_TURNS)
    transcript(root, DM_ID, "private", DM_TURNS)
    transcript(root, GROUP_ID, "group", GROUP_TURNS)


def test_finished_months_are_archived_once_per_conversation_key(tmp_path: Path) -> None:
    three_conversations(tmp_path)
    report = archiver(tmp_path).run(now=NOW)
    assert sorted(m.path for m in report.months) == [
        "sessions/group-main-slack-acme-group-C-OPS-abcdef0123/2026-10.md",
        "sessions/private-editor/2026-10.md",
        "sessions/private-main-telegram-default-dm-4242-0123456789/2026-10.md",
    ]  # November is not finished: not archived
    editor = (tmp_path / "sessions/private-editor/2026-10.md").read_text(encoding="utf-8")
    assert editor.startswith('---\nkind: archive\ncontext: private\nchannel: "editor"\n')
    assert "month: 2026-10\ndate: 2026-10-31\ntags: [archive, channel:editor]\n" in editor
    assert "November" not in editor and 'summary: "extractive"' in editor
    link = f"[sessions/{EDITOR_ID}.jsonl#turn-3](../{EDITOR_ID}.jsonl#turn-3)"
    assert f"### 2026-10-10 · turn 3\n\n{link}\n" in editor  # the third user turn of the transcript
    assert "user: Set up the postgres replica for billing in Frankfurt" in editor
    assert "assistant: Done: the replica runs in Frankfurt." in editor
    dm = (tmp_path / report.months[2].path).read_text(encoding="utf-8")
    assert 'channel: "telegram"\naccount: "default"\npeer: "4242"\nagent: "main"\n' in dm
    assert "# Sessions 2026-10 · telegram · 4242 (private)" in dm

    before = {m.path: (tmp_path / m.path).stat().st_mtime_ns for m in report.months}
    again = archiver(tmp_path).run(now=NOW)
    assert again.months == [] and again.already >= 1  # a finished month is summarised once
    assert {p: (tmp_path / p).stat().st_mtime_ns for p in before} == before
    state = json.loads((tmp_path / ".mnemo" / "archive-state.json").read_text(encoding="utf-8"))
    assert state["lastRun"] == "2026-11-15" and len(state["done"]) == 3

    december = archiver(tmp_path).run(now=datetime(2026, 12, 1, tzinfo=UTC))
    assert [m.path for m in december.months] == ["sessions/private-editor/2026-11.md"]


def test_excerpts_follow_the_recurring_words_rule_and_quote_verbatim(tmp_path: Path) -> None:
    transcript(tmp_path, EDITOR_ID, "private", EDITOR_TURNS)
    archiver(tmp_path).run(now=NOW)
    text = (tmp_path / "sessions/private-editor/2026-10.md").read_text(encoding="utf-8")
    said = {t for _ts, role, t in EDITOR_TURNS if role == "user"}
    quoted = [line.removeprefix("user: ") for line in text.splitlines() if line.startswith("user: ")]
    assert quoted and set(quoted) <= said  # nothing invented
    assert "thanks" not in quoted  # fewer than two content words
    assert "Recurring topics: billing (2 days), postgres (2 days)." in text
    assert "5 message(s), 3 from the user, in 1 conversation(s) from 2026-10-03 to 2026-10-10." in text

    turns = [
        Turn("s", i, "user", f"topic{i % 3} alpha{i}", f"2026-10-{i + 1:02d}T00:00:00Z") for i in range(20)
    ]
    chosen = [u.number for u, _ in excerpts(turns)]
    # the first message, then topic0/topic1 (7 days each) before topic2 (6 days), earlier first; 8 in all
    assert chosen == [0, 1, 3, 4, 6, 7, 9, 10]


def test_a_conversation_marked_private_is_archived_only_with_consent(tmp_path: Path) -> None:
    transcript(tmp_path, EDITOR_ID, "private", EDITOR_TURNS)
    store = SessionStore(tmp_path)
    store.set_flags(store.load(EDITOR_ID), private=True)
    report = archiver(tmp_path).run(now=NOW)
    assert report.months == [] and report.skipped[0][0] == EDITOR_ID
    assert "consent" in report.skipped[0][1]
    assert not (tmp_path / "sessions/private-editor").exists()
    flags = store.set_flags(store.load(EDITOR_ID), archive=True)
    assert flags == {"private": True, "archive": True}
    assert [m.path for m in archiver(tmp_path).run(now=NOW).months] == ["sessions/private-editor/2026-10.md"]


def test_raw_transcripts_go_only_when_every_month_is_archived(tmp_path: Path) -> None:
    three_conversations(tmp_path)
    report = archiver(tmp_path, keep_raw=False).run(now=NOW)
    assert sorted(report.removed) == sorted([f"sessions/{DM_ID}.jsonl", f"sessions/{GROUP_ID}.jsonl"])
    assert not (tmp_path / "sessions" / f"{DM_ID}.jsonl").exists()
    assert (tmp_path / "sessions" / f"{EDITOR_ID}.jsonl").exists()  # it has November turns
    assert (tmp_path / "sessions/private-editor/2026-10.md").exists()


def test_a_turn_appended_during_the_run_keeps_its_raw_transcript(tmp_path: Path) -> None:
    """The run deleted a raw transcript judged by what it read at its start: a turn appended while the
    month summaries were written (the user back in that chat) was deleted with it, in no archive."""
    three_conversations(tmp_path)

    def summary_meanwhile(messages: Sequence[ChatMessage]) -> str:
        store = SessionStore(tmp_path)
        store.append(store.load(DM_ID), "user", "NEW: repot them on Sunday")
        return "- The tomato seedlings need repotting."

    origins = {DM_ID: DM_KEY, GROUP_ID: GROUP_KEY}
    run = SessionArchiver(
        tmp_path,
        tmp_path / ".mnemo",
        SessionsSettings(keep_raw=False),
        origins=lambda: origins,
        provider=lambda: ScriptedProvider(default=summary_meanwhile),
    ).run(now=NOW)
    assert f"sessions/{DM_ID}.jsonl" not in run.removed
    assert "NEW: repot them on Sunday" in (tmp_path / "sessions" / f"{DM_ID}.jsonl").read_text(
        encoding="utf-8"
    )


def test_a_dry_run_writes_nothing_and_only_finished_months_can_be_named(tmp_path: Path) -> None:
    three_conversations(tmp_path)
    report = archiver(tmp_path, keep_raw=False).run(dry_run=True, now=NOW)
    assert len(report.months) == 3 and len(report.removed) == 2 and not report.changed
    assert sorted(p.name for p in (tmp_path / "sessions").iterdir()) == sorted(
        f"{i}.jsonl" for i in (EDITOR_ID, DM_ID, GROUP_ID)
    )
    assert not (tmp_path / ".mnemo" / "archive-state.json").exists()
    for bad in ("2026-11", "2026-13", "October"):
        with pytest.raises(InvalidInput):
            archiver(tmp_path).run(bad, now=NOW)


def test_the_servers_run_is_due_once_a_day_and_runs_are_serialised(tmp_path: Path) -> None:
    three_conversations(tmp_path)
    first = archiver(tmp_path).run_if_due(NOW)
    assert first is not None and len(first.months) == 3
    assert archiver(tmp_path).run_if_due(NOW.replace(hour=23)) is None
    next_day = archiver(tmp_path).run_if_due(datetime(2026, 11, 16, tzinfo=UTC))
    assert next_day is not None and next_day.months == []
    assert archiver(tmp_path, auto_archive=False).run_if_due(datetime(2026, 11, 17, tzinfo=UTC)) is None
    holder = archiver(tmp_path)
    with holder._locked():
        with pytest.raises(ArchiveBusy):
            archiver(tmp_path).run(now=NOW)
        assert archiver(tmp_path).run_if_due(datetime(2026, 11, 18, tzinfo=UTC)) is None


def test_a_model_summary_keeps_only_bullets_the_user_said() -> None:
    turns = [Turn("s", i + 1, role, text, ts) for i, (ts, role, text) in enumerate(EDITOR_TURNS[:5])]
    seen: list[Sequence[ChatMessage]] = []

    def reply(messages: Sequence[ChatMessage]) -> str:
        seen.append(messages)
        return "Summary:\n- Billing uses postgres, with a replica in Frankfurt\n- The user adopted a cat named Zorro"

    summary = model_summary(turns, ScriptedProvider(default=reply))
    assert summary.by == "model scripted"
    assert summary.lines[1:] == ["- Billing uses postgres, with a replica in Frankfurt"]
    prompt = seen[0][-1].content
    assert "row-level security" not in prompt  # the assistant's answers are never summarised as facts
    failed = model_summary(turns, ScriptedProvider())  # no replies: the provider raises
    assert failed.by == "extractive" and "failed" in failed.notes[0]


def test_the_archive_uses_the_chat_model_when_one_is_given(tmp_path: Path) -> None:
    transcript(tmp_path, EDITOR_ID, "private", EDITOR_TURNS)
    asked: list[int] = []

    def model() -> ScriptedProvider:
        asked.append(1)
        return ScriptedProvider(default="- Billing runs on postgres with a Frankfurt replica")

    settings = SessionsSettings()
    dry = SessionArchiver(tmp_path, tmp_path / ".mnemo", settings, provider=model).run(dry_run=True, now=NOW)
    assert dry.months[0].summary == "model scripted"
    SessionArchiver(tmp_path, tmp_path / ".mnemo", settings, provider=model).run(now=NOW)
    text = (tmp_path / "sessions/private-editor/2026-10.md").read_text(encoding="utf-8")
    assert (
        'summary: "model scripted"' in text and "- Billing runs on postgres with a Frankfurt replica" in text
    )
    SessionArchiver(tmp_path, tmp_path / ".mnemo", settings, provider=model).run(now=NOW)
    assert len(asked) == 2  # nothing left to archive: the model is not even asked for


def test_session_keys_name_channel_peer_and_group() -> None:
    dm = parse_session_key("agent:main:webchat:default:dm:token@::1")
    assert (dm.channel, dm.account, dm.peer) == ("webchat", "default", "token@::1")
    group = parse_session_key("agent:ops:discord:bot:group:G1:thread:T9")
    assert (group.channel, group.group, group.thread, group.agent) == ("discord", "G1", "T9", "ops")
    assert parse_session_key("agent:main:main").channel == "all"


def test_archive_paths_are_their_own_kind_and_context() -> None:
    ws = Workspace(Path("/nonexistent"))
    found = ws.classify("sessions/group-main-slack-x/2026-02.md")
    assert found is not None and found.kind is FileKind.ARCHIVE and found.source == "archive"
    assert str(found.day) == "2026-02-28"
    assert (
        ws.classify("sessions/notes/2026-02.md") is None
        and ws.classify("sessions/private-x/2026-13.md") is None
    )
    assert archive_context("sessions/private-editor/2026-10.md") == "private"
    assert not readable_in("sessions/group-x/2026-10.md", True) and readable_in(
        "sessions/group-x/2026-10.md", False
    )
    assert not readable_in("sessions/private-editor/2026-10.md", False) and not readable_in(
        "MEMORY.md", False
    )


def test_archives_are_searched_filtered_and_deleted_alone(
    sample_workspace: Path,
    services_factory: Callable[..., Any],
    md_hashes: Callable[[Path], dict[str, str]],
) -> None:
    three_conversations(sample_workspace)
    services = services_factory(sample_workspace)
    archiver(sample_workspace).run(now=NOW)
    memory = services.memory
    memory.sync()
    found = memory.search("tomato seedlings repotting", sources=["archive"])
    assert [h.path for h in found.results][:1] == [
        "sessions/private-main-telegram-default-dm-4242-0123456789/2026-10.md"
    ]
    assert all(h.source == "archive" for h in found.results)
    by_channel = memory.search("billing postgres", filters={"kinds": ["archive"], "channel": "editor"})
    assert {h.path for h in by_channel.results} == {"sessions/private-editor/2026-10.md"}
    assert memory.search("billing postgres", filters={"channel": "telegram"}).results == []
    assert (
        memory.search("billing postgres", filters={"kinds": ["archive"], "until": "2026-10-30"}).results == []
    )
    assert memory.search("billing postgres", filters={"kinds": ["archive"], "since": "2026-10-15"}).results

    notes = {p: h for p, h in md_hashes(sample_workspace).items() if not p.startswith("sessions/")}
    (sample_workspace / "sessions/private-editor/2026-10.md").unlink()
    memory.sync()
    assert memory.search("billing postgres", filters={"kinds": ["archive"]}).results == []
    assert {p: h for p, h in md_hashes(sample_workspace).items() if not p.startswith("sessions/")} == notes
    assert (sample_workspace / "sessions" / f"{EDITOR_ID}.jsonl").exists()
    assert archiver(sample_workspace).run(now=NOW).months == []  # a deleted archive stays deleted...
    rebuilt = archiver(sample_workspace).run("2026-10", now=NOW)  # ...unless its month is asked for
    assert "sessions/private-editor/2026-10.md" in [m.path for m in rebuilt.months]


def test_group_and_private_archives_never_cross_contexts(
    sample_workspace: Path, services_factory: Callable[..., Any]
) -> None:
    three_conversations(sample_workspace)
    services = services_factory(sample_workspace)
    archiver(sample_workspace).run(now=NOW)
    services.memory.sync()
    builder = ContextBuilder(sample_workspace, services.memory, ScriptedProvider(), recall_results=10)
    question = "tomato seedlings repotting and the incident pager rota"
    private = {h.path for h in builder.recall(question, private=True).hits or ()}
    group = {h.path for h in builder.recall(question, private=False).hits or ()}
    dm_archive = "sessions/private-main-telegram-default-dm-4242-0123456789/2026-10.md"
    group_archive = "sessions/group-main-slack-acme-group-C-OPS-abcdef0123/2026-10.md"
    assert dm_archive in private and group_archive not in private
    assert group_archive in group and dm_archive not in group
    tools = ToolBox(services.memory, sample_workspace)
    refused = tools.run("s", "memory_get", {"path": dm_archive}, private=False)
    assert not refused.ok and "group session" in refused.output
    searched = tools.run("s", "memory_search", {"query": "tomato seedlings repotting"}, private=False)
    assert dm_archive not in searched.output
    assert tools.run("s", "read_file", {"path": group_archive}, private=True).ok is False


PRIVATE_ID = "2026-10-05-090000-def456"
PRIVATE_TURNS = [
    ("2026-10-05T09:00:00.000000Z", "user", "Private: the quokka sanctuary visit is planned for spring"),
    ("2026-10-05T09:00:02.000000Z", "assistant", "Noted, the quokka sanctuary in spring."),
]


def test_a_private_conversation_given_consent_later_is_archived_or_kept_never_lost(tmp_path: Path) -> None:
    """Its month was archived from the other conversations; with consent, the next run saw the month as
    done, did not archive its turns, and with keep_raw = false deleted its transcript: nowhere any more."""
    transcript(tmp_path, EDITOR_ID, "private", EDITOR_TURNS)
    transcript(tmp_path, PRIVATE_ID, "private", PRIVATE_TURNS)
    store = SessionStore(tmp_path)
    store.set_flags(store.load(PRIVATE_ID), private=True)
    archive = tmp_path / "sessions/private-editor/2026-10.md"
    first = archiver(tmp_path).run(now=NOW)
    assert [sid for sid, _ in first.skipped] == [PRIVATE_ID] and "quokka" not in archive.read_text()
    store.set_flags(store.load(PRIVATE_ID), archive=True)
    second = archiver(tmp_path).run(now=NOW)  # every transcript of the month is here: written again
    assert [m.path for m in second.months] == ["sessions/private-editor/2026-10.md"]
    text = archive.read_text()
    assert "quokka" in text and "replica" in text


def test_keep_raw_false_never_deletes_a_transcript_its_months_archive_lacks(tmp_path: Path) -> None:
    transcript(tmp_path, EDITOR_ID, "private", EDITOR_TURNS[:5])  # October only: deleted once archived
    transcript(tmp_path, PRIVATE_ID, "private", PRIVATE_TURNS)
    store = SessionStore(tmp_path)
    store.set_flags(store.load(PRIVATE_ID), private=True)
    archive = tmp_path / "sessions/private-editor/2026-10.md"
    first = archiver(tmp_path, keep_raw=False).run(now=NOW)
    assert first.removed == [f"sessions/{EDITOR_ID}.jsonl"]
    before = archive.read_text()
    store.set_flags(store.load(PRIVATE_ID), archive=True)
    second = archiver(tmp_path, keep_raw=False).run(now=NOW)
    assert second.removed == [] and (tmp_path / "sessions" / f"{PRIVATE_ID}.jsonl").exists()
    assert [sid for sid, _ in second.skipped] == [PRIVATE_ID] and "kept raw" in second.skipped[0][1]
    # Written again by name, the month would lose the conversation whose transcript is gone: refused.
    third = archiver(tmp_path, keep_raw=False).run("2026-10", now=NOW)
    assert third.months == [] and "would drop 1 conversation" in third.skipped[0][1]
    assert archive.read_text() == before
    assert (tmp_path / "sessions" / f"{PRIVATE_ID}.jsonl").exists()


def test_a_secret_typed_in_a_chat_is_redacted_in_its_archive(tmp_path: Path) -> None:
    """Excerpts quoted the user verbatim, so an AWS key typed in a chat went into the archive, which is
    memory: searched, recalled and committed (mnemo's own security audit flagged it as critical)."""
    key = "AKIAQYLPMN5HHHFPZAM2"
    turns = [
        ("2026-10-07T10:00:00.000000Z", "user", f"The billing deploy user has access key {key} for postgres"),
        ("2026-10-07T10:00:02.000000Z", "assistant", "Noted the billing deploy access key for postgres."),
        ("2026-10-08T10:00:00.000000Z", "user", "Billing postgres deploy runs nightly"),
    ]
    transcript(tmp_path, EDITOR_ID, "private", turns)
    (month,) = archiver(tmp_path).run(now=NOW).months
    text = (tmp_path / month.path).read_text(encoding="utf-8")
    assert key not in text and "<redacted:aws-access-token>" in text
    assert "1 secret(s) redacted" in month.notes
    assert key in (tmp_path / "sessions" / f"{EDITOR_ID}.jsonl").read_text(encoding="utf-8")  # (the raw log)

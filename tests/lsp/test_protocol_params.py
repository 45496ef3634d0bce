"""Every documented parameter of every custom request (docs/protocol.md), through the real server.

The client sends what an editor sends; the server decodes it as pygls does (custom params become
namedtuples, ``from`` a Python keyword is renamed), so a parameter that a handler silently drops shows
up here and nowhere else. Keyword mode (no embedding model) and a scripted chat endpoint on loopback keep
this file fast; the model is not the point.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.fake_chat_endpoint import Endpoint, agent_toml, chat_endpoint
from tests.lsp.conftest import make_workspace, start_client, wait_ready

DATA_HOME = tempfile.mkdtemp(prefix="mnemo-params-data-")  # the audit key lives outside the workspace
atexit.register(shutil.rmtree, DATA_HOME, True)  # (made at import: gone when pytest exits)
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}
NOTE = "memory/2026-11-02.md"
FACT = "Remember this: the deploy runs on Fridays after the release review."
KEPT = "The deploy runs on Fridays after the release review."
SECRET = "ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cD1fG3hJ5"
INVALID_PARAMS, REQUEST_FAILED = -32602, -32803


def reply(messages: list[dict[str, Any]]) -> tuple[str, str]:
    if str(messages[0].get("content", "")).startswith("You are saving durable memories"):
        return f"- {KEPT}", "stop"
    return "Noted.", "stop"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with chat_endpoint(reply) as ep:
        yield ep


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "mnemo", "serve"],
        server_env={**os.environ, "XDG_DATA_HOME": DATA_HOME, **GIT_IDENTITY},
    )
)
async def client(
    lsp_client: LanguageClient, tmp_path: Path, endpoint: Endpoint
) -> AsyncIterator[LanguageClient]:
    ws = make_workspace(tmp_path, "none")
    with (ws / "mnemo.toml").open("a", encoding="utf-8") as f:
        f.write(agent_toml(endpoint.url))
    lsp_client.ws = ws  # type: ignore[attr-defined]
    lsp_client.seen = {}  # type: ignore[attr-defined]
    lsp_client.asked = []  # type: ignore[attr-defined]
    lsp_client.answer = None  # type: ignore[attr-defined]

    def collect(method: str) -> None:
        @lsp_client.feature(method)
        def _note(*args: Any) -> None:
            lsp_client.seen.setdefault(method, []).append(plain(args[-1]))  # type: ignore[attr-defined]

    for method in ("mnemo/indexStatus", "mnemo/approvalsChanged", "mnemo/chatDelta"):
        collect(method)

    @lsp_client.feature("mnemo/approvalRequest")
    async def approval_request(*args: Any) -> dict[str, str]:
        lsp_client.asked.append(plain(args[-1]))  # type: ignore[attr-defined]
        answer = lsp_client.answer  # type: ignore[attr-defined]
        if answer is None:
            await asyncio.sleep(3600)  # never answers (the server withdraws the request)
        return {"choice": answer}

    await start_client(lsp_client, ws, "visual-studio-code")
    yield lsp_client
    await lsp_client.shutdown_session()


def plain(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


async def call(client: LanguageClient, method: str, params: Any) -> Any:
    return plain(await client.protocol.send_request_async(method, params))


async def refused(client: LanguageClient, method: str, params: Any, code: int, needle: str) -> None:
    with pytest.raises(Exception) as info:
        await client.protocol.send_request_async(method, params)
    assert getattr(info.value, "code", None) == code, (method, params, info.value)
    assert needle in str(info.value), (method, params, str(info.value))


async def command(client: LanguageClient, name: str, *arguments: Any) -> Any:
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=list(arguments))
    )
    return plain(result)


async def notes(client: LanguageClient, method: str, count: int) -> list[dict[str, Any]]:
    """The notifications of ``method`` received so far, once there are ``count`` (they may trail a reply)."""
    seen: dict[str, list[dict[str, Any]]] = client.seen  # type: ignore[attr-defined]
    for _ in range(200):
        if len(seen.get(method, [])) >= count:
            break
        await asyncio.sleep(0.025)
    return list(seen.get(method, []))


def got_from(result: dict[str, Any]) -> int:
    """The client decodes results as pygls does: ``from`` comes back renamed to its position."""
    return int(result.get("from", result.get("_1", -1)))


async def test_memory_search_get_status_and_reindex(client: LanguageClient) -> None:
    ws: Path = client.ws  # type: ignore[attr-defined]
    status = await wait_ready(client)
    status = await call(client, "mnemo/status", {})
    for key in ("workspace", "index", "state", "progress", "message", "files", "chunks", "provider", "model"):
        assert key in status, key
    for key in ("dims", "mode", "configProblems", "fileProblems"):
        assert key in status, key
    assert set(status["progress"]) == {"done", "total", "current"}
    assert status["state"] == "ready" and status["mode"] == "keyword" and status["files"] == 4
    assert any(s["state"] == "ready" for s in await notes(client, "mnemo/indexStatus", 1))

    # memorySearch: query, maxResults, minScore, sources
    found = await call(client, "mnemo/memorySearch", {"query": "PostgreSQL billing"})
    assert {"results", "mode", "provider", "model", "query", "notes", "weights"} <= set(found)
    assert len(found["results"]) >= 2 and found["query"] == "PostgreSQL billing"
    for key in ("vector", "text", "bm25", "decay", "weight", "score", "mmrRank", "ageDays", "superseded"):
        assert key in found["results"][0]["parts"], key
    for key in ("boost", "evidence", "reasons"):
        assert key in found["results"][0]["parts"], key
    one = await call(client, "mnemo/memorySearch", {"query": "PostgreSQL billing", "maxResults": 1})
    assert [r["citation"] for r in one["results"]] == [found["results"][0]["citation"]]
    top = found["results"][0]["score"]
    floor = await call(client, "mnemo/memorySearch", {"query": "PostgreSQL billing", "minScore": top})
    assert floor["results"] and all(r["score"] >= top for r in floor["results"])
    assert len(floor["results"]) < len(found["results"])
    none = await call(client, "mnemo/memorySearch", {"query": "PostgreSQL billing", "minScore": 1})
    assert none["results"] == [] and any("minScore" in n for n in none["notes"]), none["notes"]
    query = "summary of the day in three bullet points"
    everywhere = await call(client, "mnemo/memorySearch", {"query": query})
    assert "skills" in {r["source"] for r in everywhere["results"]}
    skills = await call(client, "mnemo/memorySearch", {"query": query, "sources": ["skills"]})
    assert skills["results"] and {r["source"] for r in skills["results"]} == {"skills"}
    memory = await call(client, "mnemo/memorySearch", {"query": query, "sources": ["memory"]})
    assert "skills" not in {r["source"] for r in memory["results"]}
    for bad, needle in [
        ({"maxResults": 3}, "query"),
        ({"query": 3}, "query"),
        ({"query": "x", "maxResults": "3"}, "maxResults"),
        ({"query": "x", "minScore": "high"}, "minScore"),
        ({"query": "x", "sources": "memory"}, "sources"),
        ({"query": "x", "sources": ["mail"]}, "sources"),
    ]:
        await refused(client, "mnemo/memorySearch", bad, INVALID_PARAMS, needle)

    # memoryGet: path, from, lines, in any key order (pygls renames `from` by its position)
    lines = (ws / NOTE).read_text(encoding="utf-8").splitlines()
    for params in (
        {"path": NOTE, "from": 2, "lines": 1},
        {"from": 2, "path": NOTE, "lines": 1},
        {"lines": 1, "path": NOTE, "from": 2},
    ):
        got = await call(client, "mnemo/memoryGet", params)
        assert (got["text"], got_from(got), got["lines"]) == (lines[1], 2, 1), params
    rest = await call(client, "mnemo/memoryGet", {"path": NOTE, "from": 8})
    assert rest["text"].split("\n") == lines[7:] and rest["totalLines"] == len(lines)
    head = await call(client, "mnemo/memoryGet", {"path": NOTE, "lines": 2})
    assert head["text"].split("\n") == lines[:2] and got_from(head) == 1
    # ... and the citations search prints; explicit from / lines replace the citation's
    for path, want in [
        (f"{NOTE}#L3-L5", lines[2:5]),
        (f"{NOTE}#L4", lines[3:4]),
        (f"{NOTE}:9", lines[8:9]),
        (f"{NOTE}:8-10", lines[7:10]),
        (found["results"][0]["citation"], None),
    ]:
        got = await call(client, "mnemo/memoryGet", {"path": path})
        if want is None:  # a search result's own citation reads back exactly its lines
            hit = found["results"][0]
            want = (ws / hit["path"]).read_text(encoding="utf-8").splitlines()
            want = want[hit["startLine"] - 1 : hit["endLine"]]
        assert got["text"].split("\n") == want, path
    got = await call(client, "mnemo/memoryGet", {"path": f"{NOTE}#L3-L9", "lines": 2})
    assert (got_from(got), got["lines"], got["path"]) == (3, 2, NOTE)
    for bad, needle in [
        ({"path": f"{NOTE}#L9-L3"}, "before it starts"),
        ({"path": f"{NOTE}#L0"}, "between 1 and"),
        ({"path": NOTE, "from": "2"}, "from"),
        ({"path": NOTE, "lines": 0}, "lines"),
        ({"from": 1}, "path"),
    ]:
        await refused(client, "mnemo/memoryGet", bad, INVALID_PARAMS, needle)

    # mnemo.reindex: [{"full": true}] rebuilds into a new file; without it the index is synced in place
    index = Path(status["index"])
    before = index.stat().st_ino
    synced = await command(client, "mnemo.reindex")
    assert synced["state"] == "ready" and index.stat().st_ino == before
    rebuilt = await command(client, "mnemo.reindex", {"full": True})
    assert rebuilt["state"] == "ready" and rebuilt["files"] == 4
    assert index.stat().st_ino != before, "full: true was ignored (no rebuild)"


async def test_commit_and_history(client: LanguageClient) -> None:
    ws: Path = client.ws  # type: ignore[attr-defined]
    await wait_ready(client)
    await refused(client, "mnemo/commit", {}, REQUEST_FAILED, "initRepo")
    first = await call(client, "mnemo/commit", {"message": "start my memory", "initRepo": True})
    assert first["message"].startswith("start my memory") and re.fullmatch(r"[0-9a-f]{40}", first["commit"])
    assert {"path": "MEMORY.md", "status": "A"} in first["files"]
    await refused(client, "mnemo/commit", {}, REQUEST_FAILED, "nothing to commit")

    with (ws / NOTE).open("a", encoding="utf-8") as f:
        f.write(f"\n## Tokens\n- ci token {SECRET}\n")
    with pytest.raises(Exception) as info:
        await client.protocol.send_request_async("mnemo/commit", {"message": "leak"})
    assert getattr(info.value, "code", None) == REQUEST_FAILED and "github-pat" in str(info.value)
    forced = await command(client, "mnemo.commit", {"message": "forced", "force": True})
    assert forced["message"].startswith("forced") and forced["files"] == [{"path": NOTE, "status": "M"}]
    await refused(client, "mnemo/commit", {"force": "yes"}, INVALID_PARAMS, "force")

    whole = await call(client, "mnemo/history", {"path": NOTE})
    assert [e["subject"] for e in whole["entries"]] == ["forced", "start my memory"]
    assert set(whole["entries"][0]) == {"commit", "date", "author", "subject"}
    line = len((ws / NOTE).read_text(encoding="utf-8").splitlines())  # the secret's line: one commit
    one = await call(client, "mnemo/history", {"path": NOTE, "line": line})
    assert (one["line"], [e["subject"] for e in one["entries"]]) == (line, ["forced"])
    cited = await call(client, "mnemo/history", {"path": f"{NOTE}#L{line}"})
    assert (cited["path"], cited["line"], cited["entries"]) == (NOTE, line, one["entries"])
    old = await command(client, "mnemo.history", {"path": "MEMORY.md", "line": 1})
    assert [e["subject"] for e in old["entries"]] == ["start my memory"]
    await refused(client, "mnemo/history", {"path": "mnemo.toml"}, INVALID_PARAMS, "Markdown")
    await refused(client, "mnemo/history", {"path": NOTE, "line": 0}, INVALID_PARAMS, "line")


async def test_chat_sessions_and_flush(client: LanguageClient, endpoint: Endpoint) -> None:
    ws: Path = client.ws  # type: ignore[attr-defined]
    await wait_ready(client)
    # private (default): MEMORY.md is in the context; group: never
    future = client.protocol.send_request("mnemo/chat", {"message": "hello there"}, msg_id="chat-7")
    private = plain(await asyncio.wrap_future(future))
    assert private["text"] == "Noted." and private["finishReason"] == "stop"
    assert "dark roast" in str(endpoint.requests[-1]["messages"])
    deltas = await notes(client, "mnemo/chatDelta", 1)
    assert deltas and {(d["sessionId"], d["requestId"]) for d in deltas} == {(private["sessionId"], "chat-7")}
    assert "".join(d["delta"] for d in deltas) == private["text"]
    group = await call(client, "mnemo/chat", {"message": "hello there", "kind": "group"})
    assert group["sessionId"] != private["sessionId"]
    assert "dark roast" not in str(endpoint.requests[-1]["messages"])
    sid = private["sessionId"]
    again = await call(client, "mnemo/chat", {"message": FACT, "sessionId": sid})
    assert again["sessionId"] == sid
    for bad, needle in [({}, "message"), ({"message": "x", "kind": "public"}, "kind")]:
        await refused(client, "mnemo/chat", bad, INVALID_PARAMS, needle)
    await refused(client, "mnemo/chat", {"message": "x", "sessionId": "../../etc"}, INVALID_PARAMS, "session")

    listed = await call(client, "mnemo/sessions", {})
    mine = next(s for s in listed["sessions"] if s["sessionId"] == sid)
    assert (
        mine["kind"] == "private"
        and mine["messages"] == 4
        and set(mine) >= {"title", "updated", "compactions"}
    )
    kinds = {s["sessionId"]: s["kind"] for s in listed["sessions"]}
    assert kinds[group["sessionId"]] == "group"

    # sources: ["sessions"] finds the transcript (after a sync); notes rank above it otherwise
    await command(client, "mnemo.reindex")
    transcripts = await call(
        client, "mnemo/memorySearch", {"query": "deploy Fridays release review", "sources": ["sessions"]}
    )
    assert transcripts["results"] and {r["source"] for r in transcripts["results"]} == {"sessions"}

    # flush: dryRun writes nothing; the command writes
    note = ws / "memory" / f"{date.today().isoformat()}.md"
    before = note.read_bytes() if note.exists() else None
    dry = await call(client, "mnemo/flush", {"sessionId": sid, "dryRun": True})
    assert dry["dryRun"] is True and dry["written"] == [] and [i["text"] for i in dry["items"]] == [KEPT]
    assert (note.read_bytes() if note.exists() else None) == before
    await refused(client, "mnemo/flush", {"sessionId": sid, "dryRun": "yes"}, INVALID_PARAMS, "dryRun")
    await refused(client, "mnemo/flush", {}, INVALID_PARAMS, "sessionId")
    real = await command(client, "mnemo.flush", {"sessionId": sid})
    assert real["dryRun"] is False and real["written"] == [f"memory/{note.name}"]
    assert f"- {KEPT} <!-- session:{sid} turn:" in note.read_text(encoding="utf-8")
    flushed = await call(client, "mnemo/chat", {"message": "/flush", "sessionId": sid})
    assert flushed["flush"] is not None and flushed["sessionId"] == sid

    # newSession: kind and previousSessionId (its last messages are saved as a snapshot)
    made = await call(client, "mnemo/newSession", {"kind": "group", "previousSessionId": sid})
    assert made["kind"] == "group" and made["sessionId"] != sid
    assert (
        re.fullmatch(r"memory/\d{4}-\d\d-\d\d-[\w-]+\.md", made["snapshot"])
        and (ws / made["snapshot"]).is_file()
    )
    bare = await call(client, "mnemo/newSession", {})
    assert bare["kind"] == "private" and bare["sessionId"] not in (sid, made["sessionId"])
    await refused(client, "mnemo/newSession", {"kind": "public"}, INVALID_PARAMS, "kind")
    # resetSession: same id, transcript archived; /new and /reset as messages
    reset = await call(client, "mnemo/resetSession", {"sessionId": sid})
    assert reset["sessionId"] == sid and (ws / "sessions" / reset["archived"]).is_file()
    await refused(client, "mnemo/resetSession", {}, INVALID_PARAMS, "sessionId")
    renewed = await call(client, "mnemo/chat", {"message": "/new", "sessionId": sid})
    assert renewed["sessionId"] != sid and renewed["text"].startswith("new session")
    again = await call(client, "mnemo/chat", {"message": "/reset", "sessionId": sid})
    assert again["sessionId"] == sid


async def test_exec_approvals_audit_and_risk(client: LanguageClient) -> None:
    await wait_ready(client)
    asked: list[dict[str, Any]] = client.asked  # type: ignore[attr-defined]

    def ran(result: dict[str, Any]) -> bool:  # it ran, or was allowed where bubblewrap cannot start
        return bool(result["ok"]) or "the sandbox is unavailable" in result["output"]

    # session and approvalTimeoutS reach the approval request
    client.answer = "allow_once"  # type: ignore[attr-defined]
    once = await call(
        client, "mnemo/exec", {"command": "echo once", "session": "params", "approvalTimeoutS": 7}
    )
    assert ran(once) and (once["decision"], once["approval"]) == ("confirm", "allow_once")
    (request,) = asked
    assert (request["session"], request["timeoutS"], request["command"]) == ("params", 7, "echo once")
    for key in ("id", "tool", "args", "summary", "rule", "reason", "expiresInS", "alwaysPatterns"):
        assert key in request, key
    changed = [n["pending"] for n in await notes(client, "mnemo/approvalsChanged", 2)]
    assert changed[:2] == [1, 0], changed
    risk = await call(client, "mnemo/riskStatus", {})
    assert "params" in risk["sessions"] and risk["level"] == 0
    assert set(risk["sessions"]["params"]) >= {"level", "score", "notice"}

    # "always": the allow rule goes into mnemo.toml, the same command is not asked again
    client.answer = "always"  # type: ignore[attr-defined]
    first = await call(client, "mnemo/exec", {"command": "echo always-fine"})
    assert first["approval"] == "always" and asked[-1]["alwaysPatterns"], asked[-1]
    assert asked[-1]["session"] == "lsp"  # the documented default
    count = len(asked)
    second = await call(client, "mnemo/exec", {"command": "echo always-fine"})
    assert len(asked) == count and second["decision"] == "allow" and ran(second)

    # unanswered: denied at approvalTimeoutS; answered through resolveApproval (id, choice)
    client.answer = None  # type: ignore[attr-defined]
    late = await call(client, "mnemo/exec", {"command": "echo late", "approvalTimeoutS": 0.5})
    assert not late["ok"] and late["approval"] == "deny" and "no answer within 0.5s" in late["output"]
    running = asyncio.ensure_future(call(client, "mnemo/exec", {"command": "echo elsewhere"}))
    for _ in range(600):
        pending = (await call(client, "mnemo/approvals", {}))["approvals"]
        if pending:
            break
        await asyncio.sleep(0.05)
    (item,) = pending
    assert item["command"] == "echo elsewhere"
    await refused(client, "mnemo/resolveApproval", {"choice": "deny"}, INVALID_PARAMS, "id")
    answer = await call(client, "mnemo/resolveApproval", {"id": item["id"], "choice": "deny"})
    assert answer == {"resolved": True}
    denied = await running
    assert not denied["ok"] and denied["approval"] == "deny" and "denied" in denied["output"]
    gone = await call(client, "mnemo/resolveApproval", {"id": item["id"], "choice": "allow_once"})
    assert gone["resolved"] is False and item["id"] in gone["message"]

    for bad, needle in [
        ({"command": "echo x", "approvalTimeoutS": 0}, "approvalTimeoutS"),
        ({"command": "echo x", "approvalTimeoutS": 3601}, "approvalTimeoutS"),
        ({"command": "echo x", "session": 3}, "session"),
        ({"command": "  "}, "command"),
    ]:
        await refused(client, "mnemo/exec", bad, INVALID_PARAMS, needle)
    audit = await call(client, "mnemo/auditVerify", {})
    assert audit["ok"] and audit["problems"] == [] and audit["entries"] >= 8
    assert audit["path"].endswith(".mnemo/audit.jsonl")

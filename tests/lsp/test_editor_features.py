"""End to end: hover scores, code lens, hygiene diagnostics, code actions, Git commit and history."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import git
import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import wait_ready

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
# The server inherits this identity for its commits (the test machine has no global git config).
for _key, _value in {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}.items():
    os.environ.setdefault(_key, _value)

SECRET = "ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cD1fG3hJ5"


def open_doc(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(
                uri=uri, language_id="markdown", version=1, text=text or path.read_text(encoding="utf-8")
            )
        )
    )
    return uri


async def wait_diagnostics(client: LanguageClient, uri: str, want: Any, timeout: float = 30) -> list[Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = list(client.diagnostics.get(uri, []))
        if want(found):
            return found
        assert loop.time() < deadline, f"diagnostics for {uri}: {found}"
        await asyncio.sleep(0.05)


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP text edits (ASCII text: UTF-16 columns are code points) in reverse order."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = offsets[e.range.start.line] + e.range.start.character
        end = offsets[e.range.end.line] + e.range.end.character
        text = text[:start] + e.new_text + text[end:]
    return text


async def code_actions(
    client: LanguageClient, uri: str, rng: types.Range, diagnostics: list[Any] | None = None
) -> list[types.CodeAction]:
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri),
            range=rng,
            context=types.CodeActionContext(diagnostics=diagnostics or []),
        )
    )
    return [a for a in result or [] if isinstance(a, types.CodeAction)]


def line_range(line: int) -> types.Range:
    return types.Range(types.Position(line, 0), types.Position(line, 0))


def make_repo(ws: Path) -> git.Repo:
    repo = git.Repo.init(ws)
    (ws / "README.txt").write_text("not memory\n", encoding="utf-8")
    repo.git.add("README.txt")
    repo.git.commit("-m", "start")
    return repo


async def test_hover_shows_last_score_and_query(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    ws: Path = keyword_client.ws  # type: ignore[attr-defined]
    await keyword_client.protocol.send_request_async("mnemo/memorySearch", {"query": "PostgreSQL billing"})
    memory = ws / "MEMORY.md"
    line = (
        memory.read_text(encoding="utf-8")
        .split("\n")
        .index("- The billing service uses PostgreSQL (decided 2026-11-02; replaces the earlier MySQL plan).")
    )
    uri = open_doc(keyword_client, memory)
    hover = await keyword_client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, 3))
    )
    assert hover is not None
    value = hover.contents.value  # type: ignore[union-attr]
    assert "PostgreSQL billing" in value
    assert "Recalled 1 time(s)" in value and "score **" in value
    assert "Decisions" in value and "evergreen" in value


async def test_code_lens_counts_recalls(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    ws: Path = keyword_client.ws  # type: ignore[attr-defined]
    for _ in range(2):
        await keyword_client.protocol.send_request_async("mnemo/memorySearch", {"query": "dark roast coffee"})
    uri = open_doc(keyword_client, ws / "MEMORY.md")
    lenses = await keyword_client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))
    )
    titles = [lens.command.title for lens in lenses or [] if lens.command]
    assert any(re.fullmatch(r"recalled 2 times, last score \d+\.\d\d", t) for t in titles), titles
    assert "not recalled yet" in titles


async def open_with_secret(client: LanguageClient, text: str) -> tuple[str, Any, list[Any]]:
    """memory/tokens.md written with ``text`` and opened: its URI, its github-pat diagnostic, all of them."""
    await wait_ready(client)
    path = client.ws / "memory" / "tokens.md"  # type: ignore[attr-defined]
    path.write_text(text, encoding="utf-8")
    uri = open_doc(client, path, text)
    found = await wait_diagnostics(client, uri, lambda ds: any(d.code == "github-pat" for d in ds))
    (secret,) = [d for d in found if d.code == "github-pat"]
    return uri, secret, found


async def test_secret_diagnostic_range_and_redaction(keyword_client: LanguageClient) -> None:
    text = f"# Tokens\n\n- 🔑 ci token: {SECRET} (rotate monthly)\n- see [the runbook](deploy-runbook.md)\n"
    uri, secret, found = await open_with_secret(keyword_client, text)
    line = text.split("\n")[2]
    start16 = line.index(SECRET) + 1  # the key emoji is two UTF-16 code units
    # Neovim lists utf-8 first: the server must still say utf-16, the unit of every column it sends.
    encoding = keyword_client.initialized_with.capabilities.position_encoding  # type: ignore[attr-defined]
    assert encoding in (None, types.PositionEncodingKind.Utf16)
    assert secret.source == "mnemo"
    assert (secret.range.start.line, secret.range.start.character) == (2, start16)
    assert (secret.range.end.line, secret.range.end.character) == (2, start16 + len(SECRET))
    assert not [d for d in found if d.code == "broken-link"], "the runbook link resolves"
    actions = await code_actions(keyword_client, uri, line_range(2), [secret])
    (redact,) = [a for a in actions if a.title.startswith("Redact secret")]
    assert redact.edit is not None and redact.edit.changes is not None
    edits = redact.edit.changes[uri]
    # The emoji makes UTF-16 and code points differ: shift back one for this ASCII-only applier.
    shifted = [
        types.TextEdit(
            types.Range(
                types.Position(e.range.start.line, e.range.start.character - 1),
                types.Position(e.range.end.line, e.range.end.character - 1),
            ),
            e.new_text,
        )
        for e in edits
    ]
    redacted = apply_edits(text, shifted)
    assert SECRET not in redacted
    assert "- 🔑 ci token: <redacted:github-pat> (rotate monthly)" in redacted


async def test_broken_link_and_budget_diagnostics(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    ws: Path = keyword_client.ws  # type: ignore[attr-defined]
    path = ws / "memory" / "links.md"
    text = "# Links\n\nSee [old notes](memory/gone.md) and [[deploy-runbook]] and [[missing-page]].\n"
    path.write_text(text, encoding="utf-8")
    uri = open_doc(keyword_client, path, text)
    found = await wait_diagnostics(
        keyword_client, uri, lambda ds: sum(d.code == "broken-link" for d in ds) == 2
    )
    spans = sorted((d.range.start.character, d.range.end.character) for d in found if d.code == "broken-link")
    line = text.split("\n")[2]
    assert spans == [
        (line.index("memory/gone.md"), line.index("memory/gone.md") + len("memory/gone.md")),
        (line.index("missing-page"), line.index("missing-page") + len("missing-page")),
    ]


async def test_promote_daily_line_to_a_memory_section(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    ws: Path = keyword_client.ws  # type: ignore[attr-defined]
    daily = ws / "memory" / "2026-11-02.md"
    text = daily.read_text(encoding="utf-8")
    line = next(i for i, ln in enumerate(text.split("\n")) if "run\n" not in ln and "migrations after" in ln)
    uri = open_doc(keyword_client, daily)
    actions = await code_actions(
        keyword_client, uri, types.Range(types.Position(line - 1, 0), types.Position(line + 1, 0))
    )
    promote = {a.title: a for a in actions if a.title.startswith("Promote to MEMORY.md")}
    assert set(promote) == {
        f"Promote to MEMORY.md › {s}" for s in ("About me", "Preferences", "Projects", "Decisions")
    }
    edit = promote["Promote to MEMORY.md › Preferences"].edit
    assert edit is not None and edit.changes is not None
    memory = ws / "MEMORY.md"
    updated = apply_edits(memory.read_text(encoding="utf-8"), edit.changes[memory.as_uri()])
    section = updated.split("## Preferences\n", 1)[1].split("\n\n## Projects", 1)[0]
    assert section.endswith(
        "- Coffee: dark roast, no sugar.\n- The staging deploy failed because the migration ran before the "
        "config was loaded; run\n  migrations after `config.load()` from now on."
    ), section
    # Evergreen files offer no promotion.
    actions = await code_actions(keyword_client, open_doc(keyword_client, memory), line_range(8))
    assert not [a for a in actions if a.title.startswith("Promote")]


async def test_commit_refuses_secrets_then_forces_and_shows_history(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    ws: Path = keyword_client.ws  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="initRepo"):
        await keyword_client.protocol.send_request_async("mnemo/commit", {})
    repo = make_repo(ws)
    result = await keyword_client.protocol.send_request_async("mnemo/commit", {"message": "first memory"})
    committed = set(repo.git.show("--name-only", "--format=", "HEAD").split())
    assert committed == {
        "MEMORY.md",
        "memory/2026-11-02.md",
        "memory/deploy-runbook.md",
        "skills/example/SKILL.md",
    }
    assert not any(p.startswith(".mnemo") for p in repo.git.ls_files().split()), (
        "the index is never committed"
    )
    assert result.message.startswith("first memory\n\nA MEMORY.md\n  + # Memory\n  + # Memory > ## About me")
    assert repo.head.commit.message == result.message
    # A secret blocks the commit with file:line rule; force overrides.
    (ws / "memory" / "keys.md").write_text(f"# Keys\n- token {SECRET}\n", encoding="utf-8")
    with (ws / "MEMORY.md").open("a", encoding="utf-8") as f:
        f.write("\n## Tools\n- ripgrep\n")
    with pytest.raises(Exception, match=r"memory/keys.md:2 github-pat"):
        await keyword_client.protocol.send_request_async("mnemo/commit", {})
    assert repo.head.commit.message == result.message
    forced = await keyword_client.protocol.send_request_async("mnemo/commit", {"force": True})
    assert forced.message.startswith("memory: update MEMORY.md, memory/keys.md (+2 sections)")
    assert "  + # Memory > ## Tools" in forced.message
    history = await keyword_client.protocol.send_request_async("mnemo/history", {"path": "MEMORY.md"})
    assert [e.subject for e in history.entries] == [forced.message.split("\n")[0], "first memory"]
    tools_line = (ws / "MEMORY.md").read_text(encoding="utf-8").split("\n").index("- ripgrep") + 1
    by_line = await keyword_client.protocol.send_request_async(
        "mnemo/history", {"path": "MEMORY.md", "line": tools_line}
    )
    assert [e.commit for e in by_line.entries] == [forced.commit]
    # The commit command (what the "Commit memory changes" code action runs) reports nothing to do.
    with pytest.raises(Exception, match="nothing to commit"):
        await keyword_client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="mnemo.commit", arguments=[{}])
        )


async def test_workspace_diagnostics_after_first_index(keyword_client: LanguageClient) -> None:
    ws: Path = keyword_client.ws  # type: ignore[attr-defined]
    await wait_ready(keyword_client)
    uri = (ws / "MEMORY.md").as_uri()
    found = await wait_diagnostics(keyword_client, uri, lambda ds: uri in keyword_client.diagnostics)
    assert found == [], "the template has no problems"


@pytest.mark.model
@pytest.mark.skipif(not HAS_LLAMA, reason="llama-cpp-python is not installed (run make install)")
async def test_near_duplicate_is_flagged_and_merged(model_client: LanguageClient) -> None:
    ws: Path = model_client.ws  # type: ignore[attr-defined]
    await wait_ready(model_client, timeout=300)
    copy = ws / "memory" / "billing.md"
    text = (
        "# Billing\n\n## Decisions\n"
        "- The billing service uses PostgreSQL (decided 2026-11-02; replaces the earlier MySQL plan).\n"
    )
    copy.write_text(text, encoding="utf-8")
    model_client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(copy.as_uri(), types.FileChangeType.Created)])
    )
    uri = open_doc(model_client, copy, text)
    found = await wait_diagnostics(
        model_client, uri, lambda ds: any(d.code == "near-duplicate" for d in ds), timeout=120
    )
    (dup,) = [d for d in found if d.code == "near-duplicate"]
    assert dup.related_information[0].location.uri == (ws / "MEMORY.md").as_uri()
    actions = await code_actions(model_client, uri, dup.range, [dup])
    (merge,) = [a for a in actions if a.title.startswith("Merge near-duplicate: keep MEMORY.md#L")]
    assert merge.edit is not None and merge.edit.changes is not None
    # the copy goes; the headings stay (later sections may live under them)
    assert apply_edits(text, merge.edit.changes[uri]) == "# Billing\n\n## Decisions\n"


async def test_a_near_duplicate_diagnostic_changed_on_its_way_back_is_skipped(
    keyword_client: LanguageClient,
) -> None:
    """A code action request whose near-duplicate diagnostic came back without its lines (or with text
    for a number) failed whole with an internal error: the Redact action beside it was lost too."""
    uri, secret, _ = await open_with_secret(keyword_client, f"# Tokens\n\n- ci token: {SECRET}\n")
    broken = [
        types.Diagnostic(line_range(2), "near-duplicate", source="mnemo", data=data)
        for data in (
            {"kind": "near-duplicate", "startLine": "x", "endLine": 3},
            {"kind": "near-duplicate", "startLine": 3, "endLine": 3},  # no otherPath
        )
    ]
    actions = await code_actions(keyword_client, uri, line_range(2), [*broken, secret])
    assert any(a.title.startswith("Redact secret") for a in actions)
    assert not any(a.title.startswith("Merge near-duplicate") for a in actions)

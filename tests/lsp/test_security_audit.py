"""``mnemo/securityAudit`` through the real server: a clean workspace, then one with bad settings."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import make_workspace, start_client, wait_ready

PRIVATE_HOME = tempfile.mkdtemp(prefix="mnemo-security-lsp-")  # audit key and token file, not the user's
atexit.register(shutil.rmtree, PRIVATE_HOME, True)  # (made at import: gone when pytest exits)
SECRET = "ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cD1fG3hJ5"
BAD_POLICY = '\n[policy]\nallow_binaries = ["bash"]\n'


def plain(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "mnemo", "serve"],
        server_env={
            **{k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")},
            "XDG_DATA_HOME": os.path.join(PRIVATE_HOME, "data"),
            "XDG_STATE_HOME": os.path.join(PRIVATE_HOME, "state"),
        },
    )
)
async def client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[LanguageClient]:
    ws = make_workspace(tmp_path, "none")
    lsp_client.ws = ws  # type: ignore[attr-defined]
    await start_client(lsp_client, ws, "visual-studio-code")
    yield lsp_client
    await lsp_client.shutdown_session()


async def audit(client: LanguageClient) -> dict[str, Any]:
    return plain(await client.protocol.send_request_async("mnemo/securityAudit", {}))  # type: ignore[no-any-return]


async def test_security_audit_over_lsp(client: LanguageClient) -> None:
    await wait_ready(client)
    ws: Path = client.ws  # type: ignore[attr-defined]
    clean = await audit(client)
    assert clean["workspace"] == str(ws.resolve())
    # a fresh workspace: nothing to fix (bubblewrap may be missing on a test machine: that is the machine)
    assert [f for f in clean["findings"] if f["id"] != "sandbox.unavailable"] == []

    with (ws / "mnemo.toml").open("a", encoding="utf-8") as f:
        f.write(BAD_POLICY)
    (ws / "memory" / "2026-11-30.md").write_text(f"# Notes\n\nthe CI token is {SECRET}\n", encoding="utf-8")
    bad = await audit(client)
    by_id = {f["id"]: f for f in bad["findings"]}
    assert by_id["policy.dangerous-binary"]["severity"] == "critical"
    assert "bash" in by_id["policy.dangerous-binary"]["message"]
    assert by_id["memory.secret"]["where"] == "memory/2026-11-30.md#L3"
    assert SECRET not in str(bad)  # findings never repeat the secret
    assert set(by_id["memory.secret"]) == {"id", "severity", "message", "fix", "where"}
    assert bad["worst"] == "critical" and bad["exitCode"] == 5 and bad["counts"]["critical"] >= 2

"""Gateway constraints: TLS with a certificate made here, the client address allowlist, per-role methods."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from jsonrpc_base import ProtocolError, TransportError
from jsonrpc_websocket import Server

from mnemo.gateway.auth import client_proof
from mnemo.gateway.constraints import AddressFilter, TlsSettingsError, role_table, server_ssl_context
from mnemo.gateway.rpc import FORBIDDEN
from mnemo.gateway.server import BindRefused, check_bind
from mnemo.gateway.settings import MethodRules, gateway_settings_from_dict

from .conftest import TOKEN, login
from .test_gateway_process import _env, _mnemo


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost (Debian's openssl; nothing downloaded)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    key.chmod(0o600)
    return cert, key


def _trusting(cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert))


async def test_wss_client_connects_and_authenticates(
    start_gateway: Any, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    gw = await start_gateway({"tls_cert": str(cert), "tls_key": str(key)})
    url = gw.url.replace("ws://", "wss://")
    client = Server(url, ssl=_trusting(cert))
    await client.ws_connect()
    try:
        challenge = await client.auth.challenge()
        proof = client_proof("token", TOKEN, challenge["nonce"])
        assert (await client.auth.login(method="token", proof=proof))["role"] == "admin"
        assert (await client.whoami())["role"] == "admin"
    finally:
        await client.close()
    https = gw.base.replace("http://", "https://")
    async with aiohttp.ClientSession() as http, http.get(https + "/health", ssl=_trusting(cert)) as r:
        assert r.status == 200  # plain HTTP routes (webhooks, health) are served over TLS too


async def test_plain_ws_client_to_a_tls_port_fails(
    start_gateway: Any, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    gw = await start_gateway({"tls_cert": str(cert), "tls_key": str(key)})
    with pytest.raises(TransportError):
        await Server(gw.url).ws_connect()  # ws:// to a TLS port: no handshake, no session
    untrusted = Server(gw.url.replace("ws://", "wss://"))  # the system CAs do not know this certificate
    with pytest.raises(TransportError):
        await untrusted.ws_connect()
    await untrusted.close()


def test_tls_settings_errors_are_clear(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    assert server_ssl_context(tmp_path, "", "") is None
    with pytest.raises(TlsSettingsError, match="go together"):
        server_ssl_context(tmp_path, str(cert), "")
    with pytest.raises(TlsSettingsError, match=r"missing\.pem"):
        server_ssl_context(tmp_path, "missing.pem", str(key))
    with pytest.raises(TlsSettingsError, match="cannot use"):
        server_ssl_context(tmp_path, str(key), str(cert))  # swapped
    assert isinstance(server_ssl_context(tmp_path, str(cert), str(key)), ssl.SSLContext)


def test_public_bind_needs_tls_unless_told_otherwise() -> None:
    with pytest.raises(BindRefused, match=r"without TLS.*tls_cert"):
        check_bind("0.0.0.0", True, tls=False, require_tls=True)
    check_bind("0.0.0.0", True, tls=True, require_tls=True)
    check_bind("0.0.0.0", True, tls=False, require_tls=False)
    check_bind("127.0.0.1", True, tls=False, require_tls=True)  # loopback: plain is fine
    settings, problems = gateway_settings_from_dict({})
    assert problems == [] and settings.require_tls is True  # the safe default


def test_cli_refuses_public_bind_without_tls(
    sample_workspace: Path, tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    env = _env(tmp_path, MNEMO_GATEWAY_TOKEN=TOKEN)
    done = _mnemo("gateway", "-w", str(sample_workspace), "--host", "0.0.0.0", "--check", env=env)
    assert done.returncode == 1 and "without TLS" in done.stderr and "tls_cert" in done.stderr
    cert, key = certificate
    with (sample_workspace / "mnemo.toml").open("a", encoding="utf-8") as f:
        f.write(f'\n[gateway]\ntls_cert = "{cert}"\ntls_key = "{key}"\nallow_from = ["10.0.0.0/8"]\n')
    done = _mnemo("gateway", "-w", str(sample_workspace), "--host", "0.0.0.0", "--check", env=env)
    assert done.returncode == 0, done.stderr
    assert "tls        on" in done.stdout and "allow_from 10.0.0.0/8" in done.stdout


async def test_address_outside_allow_from_is_refused_before_auth(
    start_gateway: Any, caplog: pytest.LogCaptureFixture
) -> None:
    gw = await start_gateway({"allow_from": ["10.0.0.0/8", "192.168.1.7"]})
    with pytest.raises(TransportError):
        await Server(gw.url).ws_connect()
    async with aiohttp.ClientSession() as http:
        async with http.post(gw.base + "/hooks/default", json={"text": "hi"}) as r:
            assert r.status == 403  # refused before the signature is even looked at
        async with http.get(gw.base + "/health") as r:
            assert r.status == 403
    assert gw.gateway.address_filter.refused == 3
    assert "not in gateway.allow_from" in caplog.text
    assert not gw.provider.calls  # nothing reached the agent


async def test_loopback_in_allow_from_is_served(start_gateway: Any) -> None:
    gw = await start_gateway({"allow_from": ["127.0.0.1/32"]})
    client = await login(gw.url)
    try:
        assert (await client.whoami())["role"] == "admin"
    finally:
        await client.close()
    assert gw.gateway.address_filter.refused == 0


def test_address_filter_matching() -> None:
    f = AddressFilter(["10.0.0.0/8", "::1/128"])
    assert f.allows("10.1.2.3") and f.allows("::1") and f.allows("::ffff:10.0.0.9")
    assert not f.allows("127.0.0.1") and not f.allows("11.0.0.1") and not f.allows(None) and not f.allows("?")
    assert AddressFilter([]).allows("203.0.113.9")


def test_allow_from_typos_fail_closed() -> None:
    settings, problems = gateway_settings_from_dict({"allow_from": ["10.0.0.0/33", "nonsense"]})
    assert settings.allow_from == ["127.0.0.0/8", "::1/128"]
    assert any("loopback only" in p for p in problems) and any("'nonsense'" in p for p in problems)
    settings, problems = gateway_settings_from_dict({"allow_from": ["10.0.0.1/8", "bad"]})
    assert settings.allow_from == ["10.0.0.0/8"] and len(problems) == 1


def test_role_table_adds_and_denies() -> None:
    known = ["health", "auth.challenge", "auth.login", "whoami", "memory.search", "memory.get", "status"]
    table, problems = role_table(
        {"user": MethodRules(allow=["status"], deny=["memory.*", "auth.login", "nope.*"])}, known
    )
    assert (
        "status" in table["user"]
        and "memory.get" not in table["user"]
        and "memory.search" not in table["user"]
    )
    assert "auth.login" in table["user"]  # everyone may still log in
    assert "memory.get" in table["admin"]  # other roles keep the built-in table
    assert problems == ["gateway.roles.user.deny: 'nope.*' matches no gateway method"]


def test_role_settings_are_checked() -> None:
    raw = {"roles": {"user": {"deny": ["memory.get"], "extra": 1}, "root": {"allow": ["status"]}}}
    settings, problems = gateway_settings_from_dict(raw)
    assert settings.roles["user"].deny == ["memory.get"] and "root" not in settings.roles
    assert any("gateway.roles.root" in p for p in problems) and any("extra" in p for p in problems)


async def test_denied_method_is_forbidden_for_that_role_only(start_gateway: Any) -> None:
    gw = await start_gateway({"roles": {"admin": {"deny": ["memory.get"]}, "user": {"allow": ["status"]}}})
    admin = await login(gw.url)
    user = await login(gw.url, role="user")
    try:
        with pytest.raises(ProtocolError) as exc:
            await admin.memory.get(path="MEMORY.md")
        assert int(exc.value.args[0]) == FORBIDDEN and "role admin" in str(exc.value)
        assert (await admin.memory.search(query="PostgreSQL"))["results"]
        assert (await user.status())["workspace"] == str(gw.root)  # granted by settings
        assert (await user.memory.get(path="MEMORY.md", lines=1))["text"] == "# Memory"
    finally:
        await admin.close()
        await user.close()

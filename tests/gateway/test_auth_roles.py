"""Login by challenge and response, rate limiting and roles, through the jsonrpc-websocket client."""

from __future__ import annotations

from typing import Any

import pytest
from jsonrpc_base import ProtocolError

from mnemo.gateway.auth import client_proof
from mnemo.gateway.rpc import AUTH_FAILED, FORBIDDEN, RATE_LIMITED

from .conftest import PASSWORD, TOKEN, connect, login


def code_of(exc: pytest.ExceptionInfo[ProtocolError]) -> int:
    return int(exc.value.args[0])


async def test_token_login_grants_admin(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await login(gw.url)
    try:
        me = await client.whoami()
        assert me["role"] == "admin"
        routes = await client.routes.list()
        assert routes["defaultAgent"] == "main"
    finally:
        await client.close()


async def test_password_login_grants_user_who_cannot_call_admin_methods(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await login(gw.url, "password", PASSWORD)
    try:
        assert (await client.whoami())["role"] == "user"
        hits = await client.memory.search(query="billing database")
        assert hits["results"], "a user may search memory"
        with pytest.raises(ProtocolError) as exc:
            await client.routes.list()
        assert code_of(exc) == FORBIDDEN
        with pytest.raises(ProtocolError) as exc:
            await client.sessions.reset(sessionKey="agent:main:main")
        assert code_of(exc) == FORBIDDEN
    finally:
        await client.close()


async def test_nothing_but_login_before_login(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await connect(gw.url)
    try:
        assert (await client.health())["loggedIn"] is False
        for call in (client.chat.send(text="hi"), client.memory.search(query="x"), client.whoami()):
            with pytest.raises(ProtocolError) as exc:
                await call
            assert code_of(exc) == FORBIDDEN
    finally:
        await client.close()


async def test_wrong_proof_expired_reuse_and_missing_challenge_fail(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await connect(gw.url)
    try:
        with pytest.raises(ProtocolError) as exc:  # no challenge asked
            await client.auth.login(method="token", proof="00" * 32)
        assert code_of(exc) == AUTH_FAILED
        challenge = await client.auth.challenge()
        with pytest.raises(ProtocolError) as exc:  # proof made with the wrong secret
            await client.auth.login(method="token", proof=client_proof("token", "guess", challenge["nonce"]))
        assert code_of(exc) == AUTH_FAILED
        good = client_proof("token", TOKEN, challenge["nonce"])
        with pytest.raises(ProtocolError) as exc:  # the challenge was used up by the failed attempt
            await client.auth.login(method="token", proof=good)
        assert code_of(exc) == AUTH_FAILED
        assert (await client.health())["loggedIn"] is False
    finally:
        await client.close()


async def test_the_secret_never_crosses_the_wire(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await connect(gw.url)
    sent: list[str] = []
    original = client._client.send_str

    async def spy(data: str, *args: Any, **kwargs: Any) -> None:
        sent.append(data)
        await original(data, *args, **kwargs)

    client._client.send_str = spy  # type: ignore[method-assign]
    try:
        challenge = await client.auth.challenge()
        proof = client_proof(
            "password", PASSWORD, challenge["nonce"], challenge["salt"], challenge["iterations"]
        )
        assert (await client.auth.login(method="password", proof=proof))["role"] == "user"
        assert sent and not any(PASSWORD in s or TOKEN in s for s in sent)
    finally:
        await client.close()


async def test_failed_logins_are_rate_limited_per_address(start_gateway: Any) -> None:
    gw = await start_gateway({"auth": {"max_failures": 3, "failure_window_s": 60}})
    client = await connect(gw.url)
    try:
        for _ in range(3):
            challenge = await client.auth.challenge()
            with pytest.raises(ProtocolError) as exc:
                await client.auth.login(
                    method="token", proof=client_proof("token", "nope", challenge["nonce"])
                )
            assert code_of(exc) == AUTH_FAILED
        challenge = await client.auth.challenge()
        with pytest.raises(ProtocolError) as exc:  # even the right proof is refused now
            await client.auth.login(method="token", proof=client_proof("token", TOKEN, challenge["nonce"]))
        assert code_of(exc) == RATE_LIMITED
    finally:
        await client.close()
    other = await connect(gw.url)  # a new connection from the same address is limited too
    try:
        challenge = await other.auth.challenge()
        with pytest.raises(ProtocolError) as exc:
            await other.auth.login(method="token", proof=client_proof("token", TOKEN, challenge["nonce"]))
        assert code_of(exc) == RATE_LIMITED
    finally:
        await other.close()


async def test_a_client_may_drop_to_guest_and_then_chats_without_private_memory(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await login(gw.url, role="guest")
    try:
        assert (await client.whoami())["role"] == "guest"
        reply = await client.chat.send(text="what coffee do I like?", peer="visitor")
        assert reply["kind"] == "group"
        system = gw.provider.calls[-1][0].content
        assert "dark roast" not in system and "Long-term memory" not in system
        with pytest.raises(ProtocolError) as exc:
            await client.memory.search(query="coffee")
        assert code_of(exc) == FORBIDDEN
    finally:
        await client.close()


async def test_admins_see_approval_requests_and_answer_them(start_gateway: Any) -> None:
    import asyncio
    import threading
    import time

    from mnemo.policy.approvals import ApprovalQueue, ApprovalRequest

    queue = ApprovalQueue()
    gw = await start_gateway(approvals=queue)
    admin = await login(gw.url)
    user = await login(gw.url, "password", PASSWORD)
    shown: list[dict[str, Any]] = []
    closed: list[str] = []
    admin.approval.request = lambda **params: shown.append(params)
    admin.approval.closed = lambda **params: closed.append(params["id"])
    request = ApprovalRequest(
        "s1", "exec", {"command": "make deploy"}, "make deploy", "confirm", "r1", "why", 30.0
    )
    answers: list[str] = []
    asking = threading.Thread(target=lambda: answers.append(queue.ask(request)))
    asking.start()
    try:
        for _ in range(100):
            if shown:
                break
            await asyncio.sleep(0.05)
        assert shown and shown[0]["command"] == "make deploy" and shown[0]["id"] == request.id
        assert [a["id"] for a in (await admin.approvals.list())["approvals"]] == [request.id]
        with pytest.raises(ProtocolError) as exc:
            await user.approvals.resolve(id=request.id, choice="allow_once")
        assert code_of(exc) == FORBIDDEN
        with pytest.raises(ProtocolError):
            await admin.approvals.resolve(id=request.id, choice="sure")
        assert (await admin.approvals.resolve(id=request.id, choice="allow_once"))["resolved"] is True
        asking.join(5)
        assert answers == ["allow_once"] and request.resolution.startswith("gateway:")
        deadline = time.monotonic() + 20  # the withdrawal is a notification: a loaded machine is slow
        while not closed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert closed == [request.id]
        assert (await admin.approvals.resolve(id=request.id, choice="deny"))["resolved"] is False
    finally:
        queue.resolve(request.id, "deny")
        await admin.close()
        await user.close()

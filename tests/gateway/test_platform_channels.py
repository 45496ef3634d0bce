"""Telegram, Slack and Discord adapters on recorded payloads, through their official client libraries.

Nothing goes to the platforms: Telegram's Bot gets a recording request object, Slack's client talks to
a local fake of its Web API, Discord's HTTP client is replaced by a recorder. The payloads are the
platforms' documented shapes (tests/gateway/payloads/).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from slack_sdk.signature import SignatureVerifier
from telegram import Bot
from telegram.request import BaseRequest, RequestData

PAYLOADS = Path(__file__).parent / "payloads"


def payload(name: str) -> dict[str, Any]:
    return dict(json.loads((PAYLOADS / name).read_text(encoding="utf-8")))


# -- Telegram ---------------------------------------------------------------------------------------
class RecordingRequest(BaseRequest):
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    @property
    def read_timeout(self) -> float | None:
        return 1.0

    async def initialize(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    async def do_request(
        self, url: str, method: str, request_data: RequestData | None = None, *args: Any, **kwargs: Any
    ) -> tuple[int, bytes]:
        params = request_data.parameters if request_data else {}
        self.calls.append((url.rsplit("/", 1)[-1], dict(params)))
        result = {
            "message_id": 9000 + len(self.calls),
            "date": int(time.time()),
            "chat": {"id": params.get("chat_id", 0), "type": "private"},
            "text": params.get("text", ""),
        }
        return 200, json.dumps({"ok": True, "result": result}).encode()


async def _post_telegram(base: str, name: str, secret: str = "tg-secret") -> int:
    headers = {"X-Telegram-Bot-Api-Secret-Token": secret, "Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{base}/channels/telegram", data=json.dumps(payload(name)), headers=headers) as response,
    ):
        return response.status


async def test_telegram_private_topic_and_unaddressed_group_messages(
    start_gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:TEST-TOKEN")
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", "tg-secret")
    gw = await start_gateway({"channels": {"telegram": {"bot_username": "mnemo_bot"}}})
    channel = gw.gateway.channels["telegram"]
    recorder = RecordingRequest()
    channel.bot = Bot("123456:TEST-TOKEN", request=recorder)

    assert await _post_telegram(gw.base, "telegram_private.json") == 200
    assert await _post_telegram(gw.base, "telegram_group_unaddressed.json") == 200
    assert await _post_telegram(gw.base, "telegram_topic.json") == 200
    assert await _post_telegram(gw.base, "telegram_photo.json") == 200
    await channel.replies.drain()
    sent = [params for method, params in recorder.calls if method == "sendMessage"]
    by_chat = {(p["chat_id"], p["reply_parameters"]["message_id"]): p for p in sent}
    assert len(sent) == 3, "the unaddressed group message must not be answered"
    private = by_chat[(52013344, 4411)]
    assert private["text"] == "echo: what database does billing use?" and "message_thread_id" not in private
    topic = by_chat[(-1002233445566, 982)]
    assert topic["message_thread_id"] == 977 and topic["text"].startswith("echo: @mnemo_bot summarise")
    photo = by_chat[(52013344, 4412)]
    assert "whiteboard from the review" in photo["text"] and "image AQADr2Zlarge" in photo["text"]
    keys = {s["sessionKey"]: s["kind"] for s in gw.gateway.core.table.list()}
    assert keys["agent:main:telegram:default:dm:52013344"] == "private"
    assert keys["agent:main:telegram:default:group:-1002233445566:thread:977"] == "group"
    assert await _post_telegram(gw.base, "telegram_private.json", secret="wrong") == 401


# -- Slack ------------------------------------------------------------------------------------------
async def fake_slack_api() -> tuple[web.AppRunner, str, list[dict[str, Any]]]:
    posted: list[dict[str, Any]] = []

    async def post_message(request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == "Bearer xoxb-test"
        form = (
            dict(await request.post()) if request.content_type != "application/json" else await request.json()
        )
        posted.append(form)
        return web.json_response({"ok": True, "channel": form["channel"], "ts": "1796029999.000100"})

    app = web.Application()
    app.router.add_post("/api/chat.postMessage", post_message)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/api/", posted


async def _post_slack(
    base: str, body: bytes, secret: str = "slack-signing", retry: bool = False
) -> tuple[int, str]:
    stamp = str(int(time.time()))
    headers = {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body),
        "Content-Type": "application/json",
    }
    if retry:
        headers["X-Slack-Retry-Num"] = "1"
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{base}/channels/slack", data=body, headers=headers) as r,
    ):
        return r.status, await r.text()


async def test_slack_events_are_verified_routed_and_answered_in_thread(
    start_gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, api_url, posted = await fake_slack_api()
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "slack-signing")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    try:
        gw = await start_gateway(
            {
                "agents": [{"id": "main", "default": True}, {"id": "work"}],
                "routes": [{"agent": "work", "team": "T0ACME001"}],
                "channels": {"slack": {"api_url": api_url}},
            }
        )
        check = json.dumps(
            {"type": "url_verification", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
        ).encode()
        status, text = await _post_slack(gw.base, check)
        assert status == 200 and json.loads(text)["challenge"].startswith("3eZbrw")
        for name in ("slack_dm.json", "slack_thread_mention.json", "slack_bot_echo.json"):
            status, _ = await _post_slack(gw.base, json.dumps(payload(name)).encode())
            assert status == 200
        status, _ = await _post_slack(gw.base, json.dumps(payload("slack_dm.json")).encode(), retry=True)
        assert status == 200
        await gw.gateway.channels["slack"].replies.drain()
        assert len(posted) == 2, "bot echoes and Slack's retries must not be answered"
        dm = next(p for p in posted if p["channel"] == "D0DM00001")
        assert dm["text"] == "echo: remind me what we decided about billing" and not dm.get("thread_ts")
        thread = next(p for p in posted if p["channel"] == "C0INCIDENT")
        assert thread["thread_ts"] == "1796025650.000100" and "file deploy.log" in thread["text"]
        keys = {s["sessionKey"] for s in gw.gateway.core.table.list()}
        assert "agent:work:slack:A0MNEMO01:dm:U0ANA0001" in keys  # routed by team
        assert "agent:work:slack:A0MNEMO01:group:C0INCIDENT:thread:1796025650.000100" in keys
        status, _ = await _post_slack(gw.base, json.dumps(payload("slack_dm.json")).encode(), secret="forged")
        assert status == 401
    finally:
        await runner.cleanup()


# -- Discord ----------------------------------------------------------------------------------------
async def test_discord_messages_from_recorded_gateway_events(
    start_gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "test-token")
    gw = await start_gateway(
        {"channels": {"discord": {"bot_user_id": "1300000000000000001"}}, "session": {"dm_scope": "per-peer"}}
    )
    channel = gw.gateway.channels["discord"]
    sent: list[tuple[int, dict[str, Any]]] = []
    template = payload("discord_dm.json")

    async def send_message(channel_id: int, *, params: Any) -> dict[str, Any]:
        sent.append((int(channel_id), dict(params.payload)))
        return {
            **template,
            "id": str(1399000000000000000 + len(sent)),
            "channel_id": str(channel_id),
            "content": params.payload.get("content", ""),
            "author": {**template["author"], "bot": True},
        }

    channel.client.http.send_message = send_message
    await channel.client._async_setup_hook()  # what Client.login does first: bind to this event loop
    state = channel.client._connection
    for name in ("discord_guild_thread.json", "discord_guild_unaddressed.json", "discord_dm.json"):
        state.parse_message_create(payload(name))
    for _ in range(50):
        await asyncio.sleep(0.05)
        if len(sent) >= 2 and not channel.replies.tasks:
            break
    await channel.replies.drain()
    assert len(sent) == 2, "a server message that does not mention the bot must not be answered"
    guild_reply = next(p for cid, p in sent if cid == 1311000000000000222)
    assert guild_reply["message_reference"]["message_id"] == 1312000000000000111
    assert "billing database" in guild_reply["content"] and "image schema.png" in guild_reply["content"]
    dm_reply = next(p for cid, p in sent if cid == 1311000000000000999)
    assert dm_reply["content"] == "echo: how do I like my coffee?"
    kinds = {s["sessionKey"]: s["kind"] for s in gw.gateway.core.table.list()}
    assert kinds["agent:main:dm:1309000000000000444"] == "private"
    assert kinds["agent:main:discord:1300000000000000001:group:1311000000000000222"] == "group"

"""Issue 18, point 4: plugins loaded without restart — agent tools and channels from the workspace's
``plugins/`` folder, registered, used, changed, reloaded and unregistered while a real gateway serves;
broken plugins reported without taking it down; plugin tools behind the same policy gate as ``exec``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import textwrap
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from jsonrpc_base import ProtocolError

from mnemo.agent import Agent
from mnemo.agent.providers import ScriptedProvider
from mnemo.gateway.rpc import FORBIDDEN
from mnemo.gateway.server import Gateway
from mnemo.gateway.settings import gateway_settings_from_dict
from mnemo.policy import AuditLog, PolicyConfig
from mnemo.policy import sandbox as sb
from mnemo.policy.approvals import ApprovalRequest, Choice
from mnemo.policy.gate import ToolGate
from mnemo.policy.verdict import Verdict
from tests.sandbox_support import bwrap_works as _bwrap_works

from . import conftest
from .conftest import PASSWORD, TOKEN, echo, login

PLUGIN_V1 = """
from aiohttp import web
from mnemo.agent.tool_plugins import AgentTool
from mnemo.gateway.channels.base import Channel
from mnemo.gateway.routing import InboundMessage

VERSION = {version}

class Weather(AgentTool):
    name = "weather"
    spec = '{{"city": "Paris"}}: the weather in a city'

    def run(self, args, ctx):
        return f"weather v{{VERSION}}: sunny in {{args.get('city')}}"

class Echo(Channel):
    name = "echo"

    def mount(self, app):
        app.router.add_post("/plugin-echo/{{peer}}", self.handle)

    async def handle(self, request):
        body = await request.json()
        message = InboundMessage(channel="echo", peer=request.match_info["peer"], text=body["text"])
        reply = await self.host.dispatch(message)
        return web.json_response({{"text": reply.text, "version": VERSION}})

    def describe(self):
        return {{"name": "echo", "endpoint": "POST /plugin-echo/<peer>"}}

TOOLS = [Weather]
CHANNELS = [Echo]
"""

RUNS_A_COMMAND = """
from mnemo.agent.tool_plugins import AgentTool

class Touch(AgentTool):
    name = "touch_note"
    spec = '{"name": "x"}: create an empty file by running touch in the sandbox'

    def run(self, args, ctx):
        out = ctx.exec(f"touch {args['name']} && echo touched")
        return f"{out.decision}: {out.output}"

TOOLS = [Touch]
"""


class Scripted:
    """An approver answering from a list, remembering what it was asked."""

    def __init__(self, *answers: Choice) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    def ask(self, request: ApprovalRequest) -> Choice:
        self.asked.append(request)
        request.resolution = "scripted"
        return self.answers.pop(0) if self.answers else "deny"


@dataclass
class Running(conftest.Running):
    agent: Agent
    audit: AuditLog


@pytest.fixture
async def start(
    sample_workspace: Path, services_factory: Callable[..., Any], tmp_path: Path
) -> AsyncIterator[Callable[..., Any]]:
    started: list[Gateway] = []

    async def go(
        policy: PolicyConfig | None = None,
        approver: Any = None,
        channels: dict[str, Any] | None = None,
        poll_s: float = 3600.0,
    ) -> Running:
        services = services_factory(sample_workspace)
        services.memory.sync()
        provider = ScriptedProvider(default=echo)
        audit = AuditLog(
            sample_workspace / ".mnemo" / "audit.jsonl", key_path=tmp_path / "keys" / "audit.key"
        )
        gate = ToolGate(sample_workspace, policy or PolicyConfig(), audit, approver or Scripted())
        agent = Agent(sample_workspace, services.memory, provider, services.settings.agent, gate)
        settings, problems = gateway_settings_from_dict(
            {"channels": channels or {}}, {"MNEMO_GATEWAY_TOKEN": TOKEN, "MNEMO_GATEWAY_PASSWORD": PASSWORD}
        )
        assert problems == []
        settings.auth.pbkdf2_iterations = 1000
        sessions = sample_workspace / ".mnemo" / "gateway-sessions.json"
        gateway = Gateway(
            sample_workspace, settings, agent, services.memory, sessions, tools=agent.tools.plugins
        )
        gateway.plugins.poll_s = poll_s
        port = await gateway.start("127.0.0.1", 0)
        started.append(gateway)
        return Running(
            gateway,
            f"ws://127.0.0.1:{port}/rpc",
            f"http://127.0.0.1:{port}",
            provider,
            sample_workspace,
            agent,
            audit,
        )

    yield go
    for gateway in started:
        with contextlib.suppress(Exception):
            await gateway.stop()


def write_plugin(root: Path, name: str, text: str) -> Path:
    (root / "plugins").mkdir(exist_ok=True)
    path = root / "plugins" / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def tool_call(name: str, args: dict[str, Any]) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def observe(messages: Any) -> str:
    return "observed: " + messages[-1].content


async def ask_tool(gw: Running, client: Any, name: str, args: dict[str, Any]) -> str:
    gw.provider.replies.extend([tool_call(name, args), observe])
    reply = await client.chat.send(text=f"please use {name}", stream=False)
    return str(reply["text"])


async def post_echo(gw: Running, text: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{gw.base}/plugin-echo/alice", json={"text": text}) as resp,
    ):
        body = await resp.json() if resp.status == 200 else await resp.text()
        return resp.status, body


def weather_allowed() -> PolicyConfig:
    policy = PolicyConfig()
    policy.tools["weather"] = Verdict.ALLOW
    return policy


async def test_a_plugin_is_loaded_used_changed_reloaded_and_removed(start: Any) -> None:
    gw = await start(policy=weather_allowed(), channels={"echo": {}})
    gw_root_plugin = write_plugin(gw.root, "weather.py", PLUGIN_V1.format(version=1))
    client = await login(gw.url)
    try:
        first = await client.plugins.reload()
        assert first["loaded"] == ["plugins/weather.py"] and first["failed"] == []
        listed = (await client.plugins.list())["plugins"]
        assert listed == [
            {
                "source": "plugins/weather.py",
                "kind": "file",
                "state": "loaded",
                "tools": ["weather"],
                "channels": ["echo"],
            }
        ]
        assert "weather v1: sunny in Paris" in await ask_tool(gw, client, "weather", {"city": "Paris"})
        assert "- weather " in gw.provider.calls[-2][0].content  # the model is told about the tool
        assert await post_echo(gw, "hi") == (200, {"text": "echo: hi", "version": 1})
        channels = {c["name"]: c for c in (await client.channels.list())["channels"]}
        assert channels["echo"]["state"] == "on" and channels["echo"]["plugin"] == "plugins/weather.py"

        write_plugin(gw.root, "weather.py", PLUGIN_V1.format(version=2))
        again = await client.plugins.reload()
        assert again["loaded"] == ["plugins/weather.py"] and again["unloaded"] == []
        assert "weather v2: sunny in Oslo" in await ask_tool(gw, client, "weather", {"city": "Oslo"})
        assert await post_echo(gw, "hey") == (200, {"text": "echo: hey", "version": 2})
        assert (await client.plugins.reload())["loaded"] == []  # unchanged: nothing reloaded

        gw_root_plugin.unlink()
        gone = await client.plugins.reload()
        assert gone["unloaded"] == ["plugins/weather.py"] and gone["plugins"] == []
        assert "weather" not in gw.agent.tools.names
        unknown = await ask_tool(gw, client, "weather", {"city": "Rome"})
        assert unknown.startswith("<tool_call>") and "sunny" not in unknown  # not a tool any more: not run
        gw.provider.replies.clear()
        assert (await post_echo(gw, "anyone?"))[0] == 404
        channels = {c["name"]: c for c in (await client.channels.list())["channels"]}
        assert channels["echo"]["state"] == "off" and "no plugin provides" in channels["echo"]["problem"]
    finally:
        await client.close()


BROKEN = {
    "syntax.py": "def broken(:\n",
    "raises.py": "raise RuntimeError('cannot import its client')\n",
    "exits.py": "import sys\nsys.exit(3)\n",
    "empty.py": "x = 1\n",
    "clash.py": """
        from mnemo.agent.tool_plugins import AgentTool
        class Exec(AgentTool):
            name = "exec"
            spec = "x"
            def run(self, args, ctx):
                return "never"
        TOOLS = [Exec]
    """,
    "notatool.py": "TOOLS = [object()]\n",
    "badstart.py": """
        from mnemo.gateway.channels.base import Channel
        class Flaky(Channel):
            name = "flaky"
            async def start(self):
                raise ConnectionError("platform unreachable")
            def describe(self):
                return {"name": "flaky"}
        CHANNELS = [Flaky]
    """,
}


async def test_broken_plugins_are_reported_and_the_gateway_keeps_serving(
    start: Any, sample_workspace: Path
) -> None:
    for name, text in BROKEN.items():
        write_plugin(sample_workspace, name, text)
    good = write_plugin(sample_workspace, "good.py", PLUGIN_V1.format(version=1))
    gw = await start(policy=weather_allowed(), channels={"echo": {}, "flaky": {}})  # loads at start
    client = await login(gw.url)
    try:
        assert (await client.health())["ok"] is True
        states = {p["source"]: p for p in (await client.plugins.list())["plugins"]}
        assert states["plugins/good.py"]["state"] == "loaded"
        problems = {s.removeprefix("plugins/"): p.get("problem", "") for s, p in states.items()}
        assert "SyntaxError" in problems["syntax.py"] and "line 1" in problems["syntax.py"]
        assert "RuntimeError: cannot import its client" in problems["raises.py"]
        assert "SystemExit" in problems["exits.py"]
        assert "neither TOOLS" in problems["empty.py"]
        assert "'exec'" in problems["clash.py"] and "built-in" in problems["clash.py"]
        assert "not an AgentTool" in problems["notatool.py"]
        assert "channel flaky: did not start: ConnectionError" in problems["badstart.py"]
        for name in ("syntax.py", "raises.py", "exits.py", "empty.py", "clash.py", "notatool.py"):
            assert states[f"plugins/{name}"]["state"] == "failed" and states[f"plugins/{name}"]["tools"] == []
        status = await client.status()
        assert any(p["source"] == "plugins/raises.py" and "problem" in p for p in status["plugins"])
        channels = {c["name"]: c for c in status["channels"]}
        assert channels["flaky"]["state"] == "off" and channels["echo"]["state"] == "on"

        good.write_text(good.read_text(encoding="utf-8") + "\nthis is not python\n", encoding="utf-8")
        result = await client.plugins.reload()
        assert [f["source"] for f in result["failed"]].count("plugins/good.py") == 1
        states = {p["source"]: p for p in result["plugins"]}
        assert states["plugins/good.py"]["state"] == "stale"  # the previous version keeps running
        assert "weather v1" in await ask_tool(gw, client, "weather", {"city": "Lyon"})
        assert await post_echo(gw, "still here") == (200, {"text": "echo: still here", "version": 1})
        assert (await client.chat.send(text="and chat?", stream=False))["text"] == "echo: and chat?"
    finally:
        await client.close()


async def test_the_folder_is_watched(start: Any) -> None:
    gw = await start(policy=weather_allowed(), poll_s=0.1)
    client = await login(gw.url)
    try:
        write_plugin(gw.root, "weather.py", PLUGIN_V1.format(version=7))
        for _ in range(200):  # bounded: the watcher polls every 0.1 s
            if "weather" in gw.agent.tools.names:
                break
            await asyncio.sleep(0.05)
        assert "weather v7" in await ask_tool(gw, client, "weather", {"city": "Kyiv"})
    finally:
        await client.close()


async def test_reloading_plugins_is_for_admins(start: Any) -> None:
    gw = await start()
    client = await login(gw.url, "password", PASSWORD)
    try:
        for call in (client.plugins.reload, client.plugins.list):
            with pytest.raises(ProtocolError) as exc:
                await call()
            assert int(exc.value.args[0]) == FORBIDDEN
    finally:
        await client.close()


async def test_a_plugin_tool_is_gated_by_policy_like_exec(start: Any, sample_workspace: Path) -> None:
    write_plugin(sample_workspace, "touch.py", RUNS_A_COMMAND)
    write_plugin(sample_workspace, "weather.py", PLUGIN_V1.format(version=1))
    policy = PolicyConfig()
    policy.tools["touch_note"] = Verdict.ALLOW  # the tool itself may run; its command is exec's business
    policy.tools["weather"] = Verdict.DENY
    approver = Scripted("deny")
    gw = await start(policy=policy, approver=approver)
    client = await login(gw.url)
    try:
        denied = await ask_tool(gw, client, "weather", {"city": "Paris"})
        assert "refused by policy (default:weather)" in denied and "sunny" not in denied

        out = await ask_tool(gw, client, "touch_note", {"name": "made-by-plugin"})
        assert "confirm: refused: the user denied it" in out  # exec asked (confirm), the user said no
        assert [r.tool for r in approver.asked] == ["exec"] and approver.asked[0].args["command"].startswith(
            "touch"
        )
        assert not (gw.root / "made-by-plugin").exists()

        escape = await ask_tool(gw, client, "touch_note", {"name": "plugins/evil.py"})
        assert "refused by policy (builtin:protected)" in escape  # the agent cannot write plugins
        assert not (gw.root / "plugins" / "evil.py").exists() and len(approver.asked) == 1

        decisions = [
            (e["data"]["tool"], e["data"]["decision"]) for e in gw.audit.entries() if e["kind"] == "decision"
        ]
        assert ("weather", "deny") in decisions and ("touch_note", "allow") in decisions
        assert ("exec", "confirm") in decisions  # asked (the user said no)
        assert ("exec", "deny") in decisions  # plugins/evil.py: refused without asking
        approvals = [e["data"] for e in gw.audit.entries() if e["kind"] == "approval"]
        assert [(a["tool"], a["choice"]) for a in approvals] == [("exec", "deny")]
        assert gw.audit.verify().ok
    finally:
        await client.close()


@pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap unavailable: apt-get install -y bubblewrap")
async def test_an_approved_plugin_command_runs_in_the_sandbox(start: Any, sample_workspace: Path) -> None:
    write_plugin(sample_workspace, "touch.py", RUNS_A_COMMAND)
    policy = PolicyConfig()
    policy.tools["touch_note"] = Verdict.ALLOW
    gw = await start(policy=policy, approver=Scripted("allow_once"))
    client = await login(gw.url)
    try:
        out = await ask_tool(gw, client, "touch_note", {"name": "made-by-plugin"})
        assert "confirm: touched" in out
        assert (gw.root / "made-by-plugin").exists()
        # past the policy too, the sandbox holds plugins/ read-only (the gateway runs that code unsandboxed)
        direct = sb.run_sandboxed("echo 'TOOLS = []' > plugins/evil.py; echo rc=$?", gw.root)
        assert "rc=0" not in direct.stdout and not (gw.root / "plugins" / "evil.py").exists()
    finally:
        await client.close()

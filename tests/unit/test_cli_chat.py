"""`mnemo chat`, `mnemo flush` and `mnemo sessions` as real processes, against a scripted
OpenAI-compatible endpoint on loopback (no model): session ids you can find, continue and flush,
the interactive mode read from a pipe, Ctrl-C stopping a reply but not the chat, and a line typed
while a reply streams steering it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from tests.fake_chat_endpoint import Endpoint, agent_toml, chat_endpoint

FACT = "Remember this: the deploy runs on Fridays after the release review."
STEER = "be brief from now on"
STORY = " ".join(f"w{i}" for i in range(400))  # long, and never repeats itself


def reply(messages: list[dict[str, Any]]) -> tuple[str, str]:
    system = str(messages[0].get("content", ""))
    last = str(messages[-1].get("content", ""))
    if system.startswith("You are saving durable memories"):
        return "- The deploy runs on Fridays after the release review.\n- What day is the deploy?", "stop"
    if "story" in last:
        return STORY, "stop"
    if STEER in last:
        return "Brief.", "stop"
    return "Noted.", "stop"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with chat_endpoint(reply, delay_s=0.0) as ep:
        yield ep


@pytest.fixture
def ws(make_workspace: Callable[..., Path], sample_notes: dict[str, Any], endpoint: Endpoint) -> Path:
    toml = '[embedding]\nprovider = "none"\n' + agent_toml(endpoint.url, recall_results=0)
    return make_workspace(sample_notes, toml=toml)


def mnemo(ws: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mnemo", *args, "-w", str(ws)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def session_lines(stderr: str) -> list[str]:
    return [line.split()[1] for line in stderr.splitlines() if line.startswith("session: ")]


def events(ws: Path, session_id: str) -> list[dict[str, Any]]:
    path = ws / "sessions" / f"{session_id}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_one_message_prints_the_session_id_and_continues_it(ws: Path) -> None:
    first = mnemo(ws, "chat", "--no-sync", "-m", FACT)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "Noted."  # stdout is the reply only
    assert first.stderr.splitlines()[-1].startswith("session: ")  # scriptable: the last line
    (sid,) = session_lines(first.stderr)
    again = mnemo(ws, "chat", "--no-sync", "--session", sid, "-m", "and then?")
    assert again.returncode == 0 and session_lines(again.stderr) == [sid]
    assert [e["type"] for e in events(ws, sid)] == ["session", "user", "assistant", "user", "assistant"]
    as_json = json.loads(mnemo(ws, "chat", "--no-sync", "--session", sid, "-m", "ok", "--json").stdout)
    assert as_json["sessionId"] == sid and as_json["text"] == "Noted."
    listed = mnemo(ws, "sessions")
    assert listed.returncode == 0 and sid in listed.stdout
    missing = mnemo(ws, "chat", "--no-sync", "--session", "no-such-session", "-m", "hi")
    assert missing.returncode == 2 and "no session no-such-session" in missing.stderr
    assert not (ws / "sessions" / "no-such-session.jsonl").exists()


def test_flush_dry_run_shows_kept_and_rejected_and_writes_nothing(ws: Path) -> None:
    sid = session_lines(mnemo(ws, "chat", "--no-sync", "-m", FACT).stderr)[0]
    note = ws / "memory" / f"{date.today().isoformat()}.md"
    dry = mnemo(ws, "flush", "--session", sid, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == f"would keep 1 item(s) in memory/{note.name}; rejected 1"
    assert "keep: The deploy runs on Fridays after the release review.  (user, turn 1)" in dry.stdout
    assert "reject: What day is the deploy?  -- a copy of the user's question, not a fact" in dry.stdout
    assert not note.exists()
    assert [e["type"] for e in events(ws, sid)][-1] == "assistant"  # no flush event either
    real = mnemo(ws, "flush", "--session", sid, "--json")
    report = json.loads(real.stdout)
    assert report["written"] == [f"memory/{note.name}"] and report["kept"] == 1
    assert report["rejected"] == [
        {"text": "What day is the deploy?", "reason": report["rejected"][0]["reason"]}
    ]
    lines = [x for x in note.read_text(encoding="utf-8").splitlines() if x.startswith("- ")]
    assert lines == [f"- The deploy runs on Fridays after the release review. <!-- session:{sid} turn:1 -->"]


def test_interactive_mode_from_a_pipe(ws: Path) -> None:
    done = mnemo(ws, "chat", "--no-sync", stdin=f"{FACT}\n/flush\n/new\nhello again\n/quit\nnever sent\n")
    assert done.returncode == 0, done.stderr
    first, second = session_lines(done.stderr)
    assert first != second
    assert "> " not in done.stdout  # no prompt when stdin is not a terminal
    assert done.stdout.count("Noted.") == 2
    assert "kept 1 item(s) in memory/" in done.stdout  # /flush answered with its summary
    assert "reject: What day is the deploy?" in done.stderr
    assert [e["type"] for e in events(ws, first)] == ["session", "user", "assistant", "flush"]
    assert [e["text"] for e in events(ws, second) if e["type"] == "user"] == ["hello again"]


def test_ctrl_c_stops_the_reply_not_the_chat(ws: Path, endpoint: Endpoint) -> None:
    endpoint.delay_s = 0.02  # 400 words: 8 s, time enough to press Ctrl-C
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "chat", "--no-sync", "-w", str(ws)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(iter(lambda: proc.stdout.read(1), "")), daemon=True)
    reader.start()
    try:
        proc.stdin.write("tell me a story\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while "w5 " not in "".join(out) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "w5 " in "".join(out), "the reply never started streaming"
        os.kill(proc.pid, signal.SIGINT)
        proc.stdin.write("what now?\n/quit\n")
        proc.stdin.flush()
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read()
    reader.join(5)
    assert "[stopped]" in stderr
    assert "w399" not in "".join(out)  # generation stopped
    assert "".join(out).rstrip().endswith("Noted.")  # the next message was still answered
    (sid,) = session_lines(stderr)
    answers = [e for e in events(ws, sid) if e["type"] == "assistant"]
    assert answers[0]["finish"] == "cancelled" and answers[1]["text"] == "Noted."


def test_one_message_into_a_pipe_prints_the_kept_text_once(ws: Path, endpoint: Endpoint) -> None:
    # A script reads the kept reply (after loop trimming or grounding), once, not the raw stream.
    done = mnemo(ws, "chat", "--no-sync", "-m", "hello there")
    assert done.returncode == 0, done.stderr
    assert "--- kept as:" not in done.stdout
    (sid,) = session_lines(done.stderr)
    (answer,) = [e for e in events(ws, sid) if e["type"] == "assistant"]
    assert answer["text"] and done.stdout.strip() == answer["text"].strip()


def test_a_line_typed_while_a_reply_streams_steers_it(ws: Path, endpoint: Endpoint) -> None:
    endpoint.delay_s = 0.01  # 400 words: 4 s of streaming to type into
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "chat", "--no-sync", "--steer", "-w", str(ws)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(iter(lambda: proc.stdout.read(1), "")), daemon=True)
    reader.start()

    def wait_for(text: str) -> None:
        deadline = time.monotonic() + 60
        while text not in "".join(out) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert text in "".join(out), f"never saw {text!r} in {''.join(out)[-200:]!r}"

    try:
        proc.stdin.write("tell me a story\n")
        proc.stdin.flush()
        wait_for("w5 ")
        proc.stdin.write(f"{STEER}\n")  # while the story streams
        proc.stdin.flush()
        wait_for("Brief.")
        proc.stdin.write("/quit\n")
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read()
    reader.join(5)
    text = "".join(out)
    assert f"(steering) {STEER}" in stderr
    assert text.index("w399") < text.index("Brief.")  # the story was not stopped; the steering answered next
    steered = [r for r in endpoint.requests if STEER in str(r["messages"][-1].get("content", ""))]
    assert steered, "the model never saw the steering line"
    (sid,) = session_lines(stderr)
    users = [e for e in events(ws, sid) if e["type"] == "user"]
    assert [e["text"] for e in users] == ["tell me a story", STEER]
    assert users[1].get("steering") is True and not users[0].get("steering")

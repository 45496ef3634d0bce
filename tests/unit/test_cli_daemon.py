"""`mnemo search/get/status` through a running server (`mnemo serve --daemon`), and alone (one-shot,
the index opened read-only), as real processes on real indexes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SAMPLE_NOTES, WorkspaceBuilder, settle

KEYWORD = '[embedding]\nprovider = "none"\n'


def mnemo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mnemo", *args], capture_output=True, text=True, timeout=120)


def search_json(ws: Path, query: str, *extra: str) -> dict[str, Any]:
    done = mnemo("search", "--json", "-w", str(ws), *extra, query)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def writer_pid(ws: Path) -> int | None:
    try:
        return int(json.loads((ws / ".mnemo" / "writer.json").read_text(encoding="utf-8"))["pid"])
    except (OSError, ValueError, KeyError):
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie of ours has exited
        return not Path(f"/proc/{pid}/status").read_text().count("State:\tZ")
    return True


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


@contextlib.contextmanager
def daemon(ws: Path, idle_minutes: float = 5.0) -> Iterator[int]:
    started = mnemo("serve", "--daemon", "-w", str(ws), "--idle-minutes", str(idle_minutes))
    assert started.returncode == 0, started.stderr
    assert "serving" in started.stdout, started.stdout
    pid = writer_pid(ws)
    assert pid is not None and alive(pid)
    try:
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        wait_gone(pid, 30)


@pytest.fixture
def indexed(make_workspace: WorkspaceBuilder) -> Path:
    ws = make_workspace(SAMPLE_NOTES, toml=KEYWORD)
    settle(ws)  # notes written before they are indexed, not within the same clock tick (mnemo.index.racy)
    done = mnemo("index", "-w", str(ws))
    assert done.returncode == 0, done.stderr
    return ws


def ranked(outcome: dict[str, Any]) -> list[tuple[str, float, str]]:
    return [(hit["citation"], hit["score"], hit["snippet"]) for hit in outcome["results"]]


def test_search_through_a_running_server_gives_the_one_shot_results(indexed: Path) -> None:
    index = indexed / ".mnemo" / "index.duckdb"
    before = index.stat().st_mtime_ns
    alone = search_json(indexed, "billing database PostgreSQL")
    assert alone["results"] and alone["results"][0]["path"] == "MEMORY.md"
    logged = mnemo("search", "-v", "-w", str(indexed), "billing database PostgreSQL")
    assert "through the index writer" not in logged.stderr, logged.stderr  # read alone, not synced
    assert index.stat().st_mtime_ns == before  # the one-shot read the index without writing it
    assert not (indexed / ".mnemo" / "index.duckdb.wal").exists()
    with daemon(indexed) as pid:
        served = search_json(indexed, "billing database PostgreSQL")
        assert ranked(served) == ranked(alone)
        assert served["mode"] == alone["mode"] == "keyword"
        status = mnemo("status", "--json", "-w", str(indexed))
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["writer"] == "a running server"
        got = mnemo("get", "-w", str(indexed), "MEMORY.md#L7-L8")
        assert got.returncode == 0 and "PostgreSQL" in got.stdout, got.stderr
        # a note written while the daemon runs is found: a search through it syncs first
        (indexed / "memory" / "2026-11-20.md").write_text("# 2026-11-20\n\n- Zanzibar offsite.\n")
        fresh = search_json(indexed, "Zanzibar")
        assert [hit["path"] for hit in fresh["results"]] == ["memory/2026-11-20.md"]
        assert writer_pid(indexed) == pid and alive(pid)


def test_the_daemon_exits_after_idle_minutes(indexed: Path) -> None:
    with daemon(indexed, idle_minutes=0.02) as pid:  # 1.2 s without a request
        assert wait_gone(pid, 60), "the daemon outlived its idle time"
        assert not (indexed / ".mnemo" / "memory.sock").exists()
        alone = search_json(indexed, "tomatoes")  # and the index is free for the next process
        assert alone["results"][0]["path"] == "memory/gardening.md"


def test_an_editor_server_takes_the_index_from_the_daemon(indexed: Path, services_factory: Any) -> None:
    with daemon(indexed) as pid:
        services = services_factory(indexed)
        shared = services.share_index("editor")
        assert shared.start()  # the daemon yielded: the editor's server writes the index now
        assert wait_gone(pid, 60), "the daemon kept running after it yielded"
        assert shared.is_writer and writer_pid(indexed) == os.getpid()


def test_a_stale_writer_record_is_ignored(indexed: Path) -> None:
    index_dir = indexed / ".mnemo"
    dead = index_dir / "memory.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(dead))  # a socket file nobody listens on: its writer was killed
    record = {"pid": 999_999_999, "role": "daemon", "socket": str(dead)}
    (index_dir / "writer.json").write_text(json.dumps(record), encoding="utf-8")
    found = search_json(indexed, "tomatoes")
    assert found["results"][0]["path"] == "memory/gardening.md"
    status = mnemo("status", "--json", "-w", str(indexed))
    assert status.returncode == 0 and "writer" not in json.loads(status.stdout), status.stdout


def test_a_daemon_that_exits_takes_its_writer_record_with_it(indexed: Path) -> None:
    """A later command then opens the index itself at once, instead of trying a dead socket."""
    with daemon(indexed) as pid:
        assert writer_pid(indexed) == pid
    assert wait_gone(pid, 30)
    assert not (indexed / ".mnemo" / "writer.json").exists()
    assert search_json(indexed, "tomatoes")["results"][0]["path"] == "memory/gardening.md"


def test_a_writer_record_without_its_socket_file_is_not_tried(tmp_path: Path) -> None:
    from mnemo.memory.writer_client import ask_writer

    record = {"pid": 999_999_999, "role": "daemon", "socket": str(tmp_path / "gone.sock")}
    (tmp_path / "writer.json").write_text(json.dumps(record), encoding="utf-8")
    assert ask_writer(tmp_path, "status") is None


def test_one_shot_search_alone_syncs_a_changed_file_first(indexed: Path) -> None:
    (indexed / "memory" / "gardening.md").write_text("# Gardening\n\nBasil wants warm nights.\n")
    unsynced = search_json(indexed, "tomatoes", "--no-sync")  # the index as it is, read-only
    assert unsynced["results"][0]["path"] == "memory/gardening.md"
    found = search_json(indexed, "basil")  # the change seen: the writer's path synced it
    assert [hit["path"] for hit in found["results"]] == ["memory/gardening.md"]
    assert all(hit["path"] != "memory/gardening.md" for hit in search_json(indexed, "tomatoes")["results"])


ONE_SHOT = """
import json, sys
from mnemo.cli.main import main
code = main(["search", "--json", "-w", sys.argv[1], "tomatoes"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""
NOT_FOR_A_KEYWORD_SEARCH = (
    "duckdb",  # the package's Python layer; its engine, ``_duckdb``, is what a search needs
    "numpy",
    "pyarrow",
    "pygls",
    "lsprotocol",
    "llama_cpp",
    "mnemo.lsp",
    "mnemo.agent",
    "mnemo.memory.service",
    "mnemo.index.indexer",
    "mnemo.index.store",
    "mnemo.cli.chat",
    "mnemo.cli.gateway",
    "mnemo.index.writer_api",  # the writer's rows and protocol
    "mnemo.memory.status",  # (the search notes are in mnemo.memory.notes)
    "mnemo.memory.reading",
    "mnemo.markdown.chunker",  # a search compares the chunker's version only (mnemo.markdown.version)
    "mnemo.markdown.frontmatter",
    "mnemo.index.feedback",  # only with the usefulness prior on (off by default)
    # and from the standard library, what only a writer, a server or a client of one needs
    "socket",
    "hashlib",
    "tempfile",
    "decimal",
    "shutil",  # with the compression modules: argparse's way to the terminal's width (mnemo.cli.main.help_width)
)


def test_a_one_shot_keyword_search_loads_only_what_it_needs(indexed: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", ONE_SHOT, str(indexed)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (
        report["code"] == 0
        and "mnemo.memory.readonly" in report["modules"]
        and "_duckdb" in report["modules"]
    )
    loaded = [
        m for m in report["modules"] if any(m == p or m.startswith(p + ".") for p in NOT_FOR_A_KEYWORD_SEARCH)
    ]
    assert loaded == [], f"a one-shot keyword search imported {loaded}"


def loaded_by(ws: Path, *argv: str) -> tuple[int, list[str]]:
    """Run ``mnemo argv`` in a fresh interpreter: its exit code and every module it imported."""
    script = (
        "import json, sys\nfrom mnemo.cli.main import main\n"
        "code = main(sys.argv[2:] + ['-w', sys.argv[1]])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(ws), *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return int(report["code"]), list(report["modules"])


def test_a_command_a_running_server_answers_loads_no_index_code(indexed: Path) -> None:
    with daemon(indexed):
        for argv in (["search", "--json", "tomatoes"], ["status"], ["index"]):
            code, modules = loaded_by(indexed, *argv)
            assert code == 0
            heavy = [m for m in modules if m.split(".")[0] in ("duckdb", "numpy", "pyarrow")]
            heavy += [m for m in modules if m.startswith(("mnemo.index.snapshot", "mnemo.search.hybrid"))]
            assert heavy == [], f"`mnemo {argv[0]}` through the daemon imported {heavy}"
            if argv[0] == "search":  # it prints the server's results: none of the other answers' types
                others = (
                    "mnemo.memory.status",
                    "mnemo.memory.turns",
                    "mnemo.index.feedback",
                    "mnemo.index.api",
                )
                assert [m for m in modules if m in others] == [], modules
                assert "shutil" not in modules  # argparse's way to the terminal's width


def test_a_no_op_index_opens_nothing_for_writing(indexed: Path) -> None:
    index = indexed / ".mnemo" / "index.duckdb"
    before = index.stat().st_mtime_ns
    code, modules = loaded_by(indexed, "index")
    assert code == 0
    assert "mnemo.index.indexer" not in modules and "mnemo.memory.service" not in modules
    assert index.stat().st_mtime_ns == before
    files = json.loads(mnemo("status", "--json", "-w", str(indexed)).stdout)["files"]
    done = mnemo("index", "-w", str(indexed))
    assert done.returncode == 0 and f"indexed 0 changed file(s) of {files}," in done.stdout, done.stdout
    # a changed note is not a no-op: the writer's path indexes it
    (indexed / "memory" / "gardening.md").write_text("# Gardening\n\nBasil wants warm nights.\n")
    done = mnemo("index", "-w", str(indexed))
    assert done.returncode == 0 and "indexed 1 changed file(s)" in done.stdout, done.stdout
    assert search_json(indexed, "basil")["results"][0]["path"] == "memory/gardening.md"
    # so is a removed one, and --full always rebuilds
    (indexed / "memory" / "gardening.md").unlink()
    done = mnemo("index", "-w", str(indexed))
    assert done.returncode == 0 and "removed 1" in done.stdout, done.stdout
    done = mnemo("index", "--full", "-w", str(indexed))
    assert done.returncode == 0 and "(full rebuild)" in done.stdout, done.stdout


@pytest.mark.model
def test_a_one_shot_hybrid_search_ranks_as_the_writer_does(make_workspace: WorkspaceBuilder) -> None:
    from mnemo import wire
    from mnemo.services import build_read_only, build_services

    ws = make_workspace(SAMPLE_NOTES, toml='[embedding]\nprovider = "local"\n')
    services = build_services(ws)
    try:
        services.memory.sync(vectors="wait")
        query = "which database does billing use"
        writer = wire.search_outcome(services.memory.search(query, record=False))
    finally:
        services.close()
    alone = wire.search_outcome(build_read_only(ws).search(query))  # read-only, exact vector scan
    assert writer["mode"] == alone["mode"] == "hybrid"
    assert [(h["citation"], h["score"], h["parts"]) for h in alone["results"]] == [
        (h["citation"], h["score"], h["parts"]) for h in writer["results"]
    ]

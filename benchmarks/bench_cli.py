"""`mnemo search` from the command line: CPU, wall time and peak RSS of the whole process, side by side.

    python benchmarks/bench_cli.py [--files 2000] [--rounds 3] [--queries 4] [--before DIR] [--qmd] [--index]
    python benchmarks/bench_cli.py --corpus zh:1000 --qmd --index       # or cmrc, msmarco (--data-dir)

A synthetic English workspace of ``--files`` notes (benchmarks/synthetic.py), or ``--corpus`` as
benchmarks/peers/run.py names them (``zh:1000``, ``cmrc``, ``msmarco[:docs=N]``), indexed in keyword mode
(``embedding.provider = "none"``, as QMD's ``qmd search``) is searched by its scored questions, every
system in turn, round after round, each round starting with the next system (so a change of machine
load hits all of them alike):

- ``one-shot``: this tree's ``mnemo search --json -k 10`` with no server (the index opened read-only);
- ``daemon``: the same with ``mnemo serve --daemon`` holding the index, warm (one call answered before
  the timed ones; its own CPU per call is read from ``/proc`` and reported apart);
- ``before``: the same command from another source tree (``--before``: e.g. ``git archive HEAD server``
  unpacked somewhere), run with ``PYTHONPATH`` pointing at it, on a copy of the workspace which that tree
  indexed (the two may differ in their index's schema);
- ``qmd``: ``qmd search --format json -n 10`` (``--qmd``; installed by benchmarks/peers/install.py).

``--index`` also times indexing from the command line, round after round: a full index of a fresh copy
of the workspace (mnemo: ``mnemo index`` with no index yet; QMD: ``qmd collection add`` into a fresh
cache) and a no-op re-index of the unchanged workspace (``mnemo index`` alone and through the daemon;
``qmd update``).

CPU is user + system time of the process and its children (``wait4``), as ``/usr/bin/time`` reports
it. Python's bytecode caches are written to a private folder first (an installed package has them).
The load average (``/proc/loadavg``) is printed before and after each system's runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import process_cpu_s  # noqa: E402
from benchmarks.synthetic import generate  # noqa: E402


@dataclass
class Sample:
    cpu: float
    wall: float
    rss_mb: float


@dataclass
class System:
    name: str
    command: list[str]
    env: dict[str, str]
    cwd: Path | None = None
    setup: str | None = None
    """A shell command run before each sample, not timed (a fresh copy to index)."""
    samples: list[Sample] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run(system: System, query: str | None) -> Sample:
    if system.setup:
        subprocess.run(system.setup, shell=True, check=True)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*system.command, *([query] if query is not None else [])],
        env=system.env,
        cwd=system.cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{system.name} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    if proc.stderr:
        proc.stderr.close()
    return Sample(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024)


def python_env(pythonpath: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "mnemo-bench-pycache")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def mnemo_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mnemo", *args], env=env, capture_output=True, text=True, check=True
    )


def start_daemon(ws: Path, env: dict[str, str]) -> int:
    mnemo_cli("serve", "--daemon", "-w", str(ws), "--idle-minutes", "30", env=env)
    return int(json.loads((ws / ".mnemo" / "writer.json").read_text())["pid"])


def stop_daemon(pid: int) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.1)


def qmd_system(ws: Path, root: Path, lang: str) -> System:
    from benchmarks.peers.corpora import Corpus
    from benchmarks.peers.install import layout
    from benchmarks.peers.peer_systems import Qmd

    peers = layout()
    if not peers.qmd_pkg.is_dir():
        raise SystemExit("QMD is not installed: python benchmarks/peers/install.py")
    files = {p.relative_to(ws).as_posix(): p.read_text(encoding="utf-8") for p in ws.rglob("*.md")}
    qmd = Qmd(root, Corpus("bench-cli", lang, files, [], {}), "keyword", peers)
    qmd.setup()
    qmd.full_index()
    command = [str(peers.node), qmd.cli, "search", "--format", "json", "-n", "10"]
    return System("qmd", command, qmd.env(), cwd=qmd.root)


def measure(systems: list[System], daemon: System | None, queries: list[str], rounds: int, ws: Path) -> None:
    for system in [*systems, *([daemon] if daemon else [])]:  # warm-up: bytecode caches, page cache
        pid = start_daemon(ws, system.env) if system is daemon else None
        run(system, queries[0])
        if pid:
            stop_daemon(pid)
    for round_no in range(rounds):
        # Each round starts with another system: the first runs just after the daemon's stop, which
        # cost the system always in that place ~10% in CPU time (callgrind counts no difference).
        for system in systems[round_no % len(systems) :] + systems[: round_no % len(systems)]:
            system.loads.append(loadavg())
            system.samples += [run(system, q) for q in queries]
        if daemon is not None:
            pid = start_daemon(ws, daemon.env)
            run(daemon, queries[0])  # a warm server: its first answer builds what it keeps in memory
            daemon.loads.append(loadavg())
            before = process_cpu_s(pid)
            daemon.samples += [run(daemon, q) for q in queries]
            daemon.server_cpu.append((process_cpu_s(pid) - before) / len(queries))
            stop_daemon(pid)


def index_systems(
    ws: Path, root: Path, env: dict[str, str], qmd: bool, lang: str
) -> list[tuple[System, System]]:
    """(full index, no-op re-index) command pairs; a full run starts from a fresh copy each time."""
    fresh = root / "fresh"
    clean = f"rm -rf {fresh} && cp -r {ws} {fresh} && rm -rf {fresh}/.mnemo"
    mnemo_index = [sys.executable, "-m", "mnemo", "index"]
    pairs = [
        (
            System("mnemo full index", [*mnemo_index, "-w", str(fresh)], env, setup=clean),
            System("mnemo no-op re-index", [*mnemo_index, "-w", str(ws)], env),
        )
    ]
    if qmd:
        from benchmarks.peers.install import layout

        peers = layout()
        qroot = root / "qmd-index"
        q = qmd_system(ws, qroot, lang)
        cli = q.command[1]
        add = [str(peers.node), cli, "collection", "add", str(ws), "--name", "mem", "--mask", "**/*.md"]
        reset = f"rm -rf {qroot / 'cache'} {qroot / 'config' / 'index.yml'}"
        pairs.append(
            (
                System("qmd full index", add, q.env, cwd=q.cwd, setup=reset),
                System("qmd no-op re-index", [str(peers.node), cli, "update"], q.env, cwd=q.cwd),
            )
        )
    return pairs


def measure_index(pairs: list[tuple[System, System]], daemon: System | None, rounds: int, ws: Path) -> None:
    for _ in range(rounds):
        for full, noop in pairs:
            full.loads.append(loadavg())
            full.samples.append(run(full, None))
            noop.loads.append(loadavg())
            noop.samples += [run(noop, None) for _ in range(3)]
        if daemon is not None:
            pid = start_daemon(ws, daemon.env)
            run(daemon, None)
            daemon.loads.append(loadavg())
            before = process_cpu_s(pid)
            daemon.samples += [run(daemon, None) for _ in range(3)]
            daemon.server_cpu.append((process_cpu_s(pid) - before) / 3)
            stop_daemon(pid)


def report(systems: list[System], args: argparse.Namespace, chunks: str) -> str:
    lines = [
        f"`python benchmarks/bench_cli.py {' '.join(sys.argv[1:])}` ({args.corpus or args.files} notes, {chunks}, "
        f"{args.rounds} rounds x {args.queries} queries, medians)",
        "",
        "| | CPU s (user+sys) | wall s | peak RSS MB | server CPU s per call | load (1/5/15 min) at each round |",
        "|---|---|---|---|---|---|",
    ]
    for s in systems:
        server = f"{statistics.median(s.server_cpu):.3f}" if s.server_cpu else "-"
        lines.append(
            f"| {s.name} | {statistics.median(x.cpu for x in s.samples):.3f} "
            f"| {statistics.median(x.wall for x in s.samples):.3f} "
            f"| {statistics.median(x.rss_mb for x in s.samples):.0f} | {server} | {'; '.join(s.loads)} |"
        )
    return "\n".join(lines)


def write_corpus(args: argparse.Namespace, ws: Path) -> tuple[list[str], str]:
    """Write the workspace; its first ``--queries`` scored questions and its language. The notes' mtimes
    are a minute old, as a user's notes are when they are indexed: a note indexed within two seconds of
    its write is compared by content until a writer records it (mnemo.index.racy)."""
    if args.corpus:
        from benchmarks.peers.corpora import load

        corpus = load(args.corpus, args.data_dir, latency_queries=0)
        corpus.write(ws)
        queries, lang = [text for _, text in corpus.scored[: args.queries]], corpus.lang
    else:
        spec = generate(args.files, "en", write_to=ws)
        queries, lang = [n.query for n in spec.needles[: args.queries]], "en"
    minute_ago = time.time() - 60
    for path in ws.rglob("*"):
        if path.is_file():
            os.utime(path, (minute_ago, minute_ago))
    return queries, lang


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=2000, help="synthetic English notes (default 2000)")
    parser.add_argument(
        "--corpus",
        help="instead: a corpus as benchmarks/peers/run.py names it (zh:1000, cmrc, msmarco:docs=N)",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=ROOT.parent / "shared" / "data", help="BEIR sets (cmrc, msmarco)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=4)
    parser.add_argument("--before", type=Path, help="another source tree's server/ folder to compare with")
    parser.add_argument(
        "--qmd", action="store_true", help="also QMD (installed by benchmarks/peers/install.py)"
    )
    parser.add_argument("--no-daemon", action="store_true")
    parser.add_argument(
        "--index", action="store_true", help="also time a full index and a no-op re-index (and QMD's)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "cli.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-cli-") as tmp:
        ws = Path(tmp) / "ws"
        queries, lang = write_corpus(args, ws)
        (ws / "mnemo.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
        env = python_env()
        mnemo_cli("index", "-w", str(ws), env=env)
        status = json.loads(mnemo_cli("status", "--json", "-w", str(ws), env=env).stdout)
        command = [sys.executable, "-m", "mnemo", "search", "--json", "-k", "10", "-w", str(ws)]
        systems = [System("mnemo one-shot", command, env)]
        if args.before:  # its own copy, indexed by that tree (an index of another schema is rebuilt)
            old_ws, old_env = Path(tmp) / "ws-before", python_env(str(args.before.resolve()))
            shutil.copytree(ws, old_ws, ignore=shutil.ignore_patterns(".mnemo"))
            mnemo_cli("index", "-w", str(old_ws), env=old_env)
            old_command = [*command[:-1], str(old_ws)]
            systems.append(System("mnemo before", old_command, old_env))
        if args.qmd:
            systems.append(qmd_system(ws, Path(tmp) / "qmd", lang))
        daemon = None if args.no_daemon else System("mnemo via daemon (client)", command, env)
        measure(systems, daemon, queries, args.rounds, ws)
        shown = [*systems, *([daemon] if daemon else [])]
        if args.index:
            pairs = index_systems(ws, Path(tmp), env, args.qmd, lang)
            index_daemon = (
                None
                if args.no_daemon
                else System(
                    "mnemo no-op re-index via daemon (client)",
                    [sys.executable, "-m", "mnemo", "index", "-w", str(ws)],
                    env,
                )
            )
            measure_index(pairs, index_daemon, args.rounds, ws)
            shown += [s for pair in pairs for s in pair] + ([index_daemon] if index_daemon else [])
        text = report(shown, args, f"{status['chunks']:,} chunks")
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Figures for the policy core: corpus block / false-positive rates, check latency, sandbox launch overhead,
and (optionally) risk-monitor detection on AgentDojo's attack texts.

    python benchmarks/bench_policy.py                       # corpus, latency, sandbox, own risk texts
    python benchmarks/bench_policy.py --agentdojo /tmp/ad/bin/python

``--agentdojo PYTHON`` runs PYTHON (an interpreter where the MIT-licensed ``agentdojo`` package is
installed, e.g. ``python -m venv /tmp/ad && /tmp/ad/bin/pip install agentdojo``) to read the attack
templates, injection goals and benign user tasks from the installed package; nothing is copied into the
repository.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "server"))  # after PYTHONPATH: a tree given there is the one measured

from mnemo.policy import PolicyConfig, SandboxUnavailable, Verdict, check, run_sandboxed, scan_text  # noqa: E402

EXTRACT = r"""
import ast, json, pathlib
import agentdojo
from agentdojo.task_suite.load_suites import get_suites
root = pathlib.Path(agentdojo.__file__).parent / "attacks"
templates = set()
for path in root.glob("*.py"):
    for node in ast.walk(ast.parse(path.read_text())):
        value = node.value if isinstance(node, ast.Constant) else None
        if isinstance(value, str) and "{goal}" in value and not value.startswith("Attack which"):
            templates.add(value)
goals, prompts = [], []
for suite in get_suites("v1.2").values():
    goals += [t.GOAL for t in suite.injection_tasks.values()]
    prompts += [t.PROMPT for t in suite.user_tasks.values()]
print(json.dumps({"templates": sorted(templates), "goals": goals, "prompts": prompts}))
"""


def _load(name: str, path: Path) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def corpus_figures(ws: Path) -> None:
    corpus = _load("policy_corpus", ROOT / "tests" / "policy_corpus.py")
    pairs: list[tuple[str, str, str]] = corpus.CORPUS  # type: ignore[attr-defined]
    corpus.prepare_workspace(ws)  # type: ignore[attr-defined]
    for label, cfg in (
        ("default config", PolicyConfig()),
        ("all corpus binaries allowlisted", PolicyConfig(allow_binaries=corpus.PERMISSIVE_BINARIES)),  # type: ignore[attr-defined]
    ):
        bad = [check("exec", {"command": d}, ws, cfg).verdict for _, d, _ in pairs]
        good = [check("exec", {"command": b}, ws, cfg).verdict for _, _, b in pairs]
        n = len(pairs)
        print(f"[corpus, {label}] {n} pairs")
        print(f"  dangerous denied:        {bad.count(Verdict.DENY) / n:6.1%}")
        print(f"  dangerous confirmed:     {bad.count(Verdict.CONFIRM) / n:6.1%}")
        print(f"  dangerous never allowed: {1 - bad.count(Verdict.ALLOW) / n:6.1%}")
        print(f"  benign denied (FP):      {good.count(Verdict.DENY) / n:6.1%}")
        print(f"  benign allowed:          {good.count(Verdict.ALLOW) / n:6.1%}")
        for category in dict.fromkeys(c for c, _, _ in pairs):
            idx = [i for i, (c, _, _) in enumerate(pairs) if c == category]
            held = sum(bad[i] is not Verdict.ALLOW for i in idx)
            fps = sum(good[i] is Verdict.DENY for i in idx)
            print(
                f"    {category:<13} {len(idx):3} pairs: dangerous held {held}/{len(idx)}, benign denied {fps}"
            )
    commands = [c for _, d, b in pairs for c in (d, b)]
    start = time.perf_counter()
    for _ in range(5):
        for command in commands:
            check("exec", {"command": command}, ws)
    per = (time.perf_counter() - start) / (5 * len(commands))
    print(f"[check latency] {per * 1e6:.0f} us per exec check (mean over {5 * len(commands)})")


def sandbox_figures(ws: Path, runs: int) -> None:
    plain, boxed = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
        plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        try:
            run_sandboxed("true", ws)
        except SandboxUnavailable as exc:
            print(f"[sandbox] unavailable: {exc}")
            return
        boxed.append(time.perf_counter() - t0)
    p, b = statistics.median(plain), statistics.median(boxed)
    print(f"[sandbox] median launch: plain sh {p * 1e3:.1f} ms, bwrap sandbox {b * 1e3:.1f} ms")
    print(f"          overhead {(b - p) * 1e3:.1f} ms per command (n={runs})")


def risk_rates(label: str, attacks: list[str], benign: list[str]) -> None:
    hits = sum(scan_text(t).severity != "clean" for t in attacks)
    fps = sum(scan_text(t).severity != "clean" for t in benign)
    print(f"[risk, {label}] detected {hits}/{len(attacks)} = {hits / max(len(attacks), 1):.1%}; ", end="")
    print(f"false positives {fps}/{len(benign)} = {fps / max(len(benign), 1):.1%}")


def agentdojo_figures(python: str) -> None:
    proc = subprocess.run([python, "-c", EXTRACT], capture_output=True, text=True, cwd="/", check=False)
    if proc.returncode != 0:
        print(f"[agentdojo] not available with {python}: {proc.stderr.strip().splitlines()[-1:]}")
        return
    data = json.loads(proc.stdout)

    def fill(template: str, goal: str) -> str:
        values = {"user": "Emma Johnson", "model": "the AI assistant", "goal": goal}
        return template.format_map(defaultdict(lambda: "the tools", values))

    usable = []
    for template in data["templates"]:
        try:
            fill(template, "x")
            usable.append(template)
        except (AttributeError, IndexError, KeyError, ValueError):
            continue  # not a plain str.format template
    data["templates"] = usable
    attacks = [fill(t, g) for t in data["templates"] for g in data["goals"]]
    print(
        f"[agentdojo] {len(data['templates'])} templates x {len(data['goals'])} goals; {len(data['prompts'])} user tasks"
    )
    risk_rates("agentdojo templated injections vs user tasks", attacks, data["prompts"])
    for template in data["templates"]:
        rate = sum(scan_text(fill(template, g)).severity != "clean" for g in data["goals"])
        print(f"    {rate / len(data['goals']):6.1%}  {template.strip()[:70]!r}")
    risk_rates("agentdojo bare goals (polite, no template)", data["goals"], [])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agentdojo", metavar="PYTHON", help="interpreter with agentdojo installed")
    parser.add_argument("--runs", type=int, default=50, help="sandbox launches to time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        corpus_figures(ws)
        sandbox_figures(ws, args.runs)
    risk = _load("test_policy_risk", ROOT / "tests" / "unit" / "test_policy_risk.py")
    risk_rates("own texts", risk.INJECTIONS, risk.BENIGN)  # type: ignore[attr-defined]
    if args.agentdojo:
        agentdojo_figures(args.agentdojo)


if __name__ == "__main__":
    main()

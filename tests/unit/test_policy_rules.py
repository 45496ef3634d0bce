"""Tool policy: defaults, config loading, strictest-wins, always-allow rules, and the command corpus."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

from mnemo.policy import PolicyConfig, Verdict, append_allow_rule, check, load_policy, strictest
from mnemo.policy.rules import Decision

_spec = importlib.util.spec_from_file_location(
    "policy_corpus", Path(__file__).parents[1] / "policy_corpus.py"
)
assert _spec and _spec.loader
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def test_defaults(ws: Path) -> None:
    for tool in ("memory_search", "memory_get"):
        assert check(tool, {"query": "x"}, ws).verdict is Verdict.ALLOW
    assert check("read_file", {"path": "notes.md"}, ws).verdict is Verdict.ALLOW
    assert check("write_file", {"path": "notes.md"}, ws).verdict is Verdict.CONFIRM
    decision = check("exec", {"command": "ls -la"}, ws)
    assert (decision.verdict, decision.rule) == (Verdict.CONFIRM, "default:exec")
    assert check("unknown_tool", {}, ws).verdict is Verdict.CONFIRM


def test_file_paths(ws: Path) -> None:
    assert check("write_file", {"path": "/etc/hosts"}, ws).rule == "builtin:outside-workspace"
    assert check("write_file", {"path": "../x.md"}, ws).verdict is Verdict.DENY
    assert check("write_file", {"path": "mnemo.toml"}, ws).rule == "builtin:persistence"
    assert check("write_file", {"path": ".git/hooks/pre-commit"}, ws).verdict is Verdict.DENY
    assert check("read_file", {"path": "~/.ssh/id_rsa"}, ws).rule == "builtin:secrets"
    assert check("read_file", {"path": "/usr/share/dict/words"}, ws).verdict is Verdict.CONFIRM
    (ws / "link").symlink_to("/etc")
    assert check("write_file", {"path": "link/passwd"}, ws).verdict is Verdict.DENY


def test_strictest_wins_and_rule_names(ws: Path) -> None:
    cfg = PolicyConfig.from_dict(
        {
            "allow_binaries": ["git", "rm"],
            "rules": [
                {"tool": "exec", "pattern": "git status*", "decision": "allow"},
                {"tool": "exec", "pattern": "git push*", "decision": "confirm", "reason": "pushes"},
                {"tool": "write_file", "pattern": "drafts/*", "decision": "allow"},
                {"tool": "exec", "pattern": "rm -rf build*", "decision": "allow"},
            ],
        }
    )
    assert check("exec", {"command": "git status --short"}, ws, cfg).verdict is Verdict.ALLOW
    push = check("exec", {"command": "git push origin dev"}, ws, cfg)
    assert (push.verdict, push.rule, push.reason) == (Verdict.CONFIRM, "config:rules[1]", "pushes")
    # one allowed segment does not carry a denied one
    chained = check("exec", {"command": "git status && rm -rf ~"}, ws, cfg)
    assert chained.verdict is Verdict.DENY and chained.rule.startswith("builtin:")
    # a config allow cannot relax a built-in deny
    assert check("exec", {"command": "rm -rf build /"}, ws, cfg).verdict is Verdict.DENY
    assert check("write_file", {"path": "drafts/a.md"}, ws, cfg).rule == "config:rules[2]"
    assert (
        check("exec", {"command": "git push --force origin main"}, ws, cfg).rule == "builtin:force-push-main"
    )
    assert check("exec", {"command": "git push -f origin dev"}, ws, cfg).verdict is Verdict.CONFIRM
    best = strictest(
        [Decision(Verdict.ALLOW, "a", ""), Decision(Verdict.DENY, "b", ""), Decision(Verdict.DENY, "c", "")]
    )
    assert best is not None and best.rule == "b"


def test_allow_binaries_match_resolved_path(ws: Path) -> None:
    cfg = PolicyConfig(allow_binaries=["/usr/bin/ls"])
    assert check("exec", {"command": "ls"}, ws, cfg).rule == "allow_binaries"
    assert check("exec", {"command": "env LANG=C nice -n 5 timeout 3 ls"}, ws, cfg).verdict is Verdict.ALLOW
    assert check("exec", {"command": "ls | wc -l"}, ws, cfg).verdict is Verdict.CONFIRM


def test_config_problems_are_reported() -> None:
    problems: list[str] = []
    cfg = PolicyConfig.from_dict(
        {"network": "yes", "bogus": 1, "rules": [{"tool": "exec", "decision": "maybe"}, {"pattern": "x"}]},
        problems,
    )
    assert cfg.network is False
    assert any("policy.network" in p for p in problems) and any("policy.bogus" in p for p in problems)
    assert any("policy.rules[0]" in p for p in problems)
    assert any("policy.rules[1]" in p for p in problems)


def test_load_policy_and_append_allow_rule(ws: Path) -> None:
    text = '# my settings\n[policy]\nnetwork = true  # keep this comment\nallow_binaries = ["ls"]\n\n[search]\nmax_results = 3'
    new = append_allow_rule(text, "exec", 'git log "*"')
    assert new.startswith(text) and "# keep this comment" in new
    parsed = tomllib.loads(new)
    assert parsed["policy"]["rules"] == [
        {"tool": "exec", "pattern": 'git log "*"', "decision": "allow", "reason": "always allowed"}
    ]
    (ws / "mnemo.toml").write_text(append_allow_rule(new, "exec", "make test"))
    cfg = load_policy(ws)
    assert cfg.network is True and [r.pattern for r in cfg.rules] == ['git log "*"', "make test"]
    with pytest.raises(ValueError):
        append_allow_rule(text, "exec", "*")
    with pytest.raises(ValueError):
        append_allow_rule("[policy]\nrules = []\n", "exec", "ls")


def _verdicts(cfg: PolicyConfig, ws: Path) -> tuple[list[Decision], list[Decision]]:
    bad = [check("exec", {"command": d}, ws, cfg) for _, d, _ in corpus.CORPUS]
    good = [check("exec", {"command": b}, ws, cfg) for _, _, b in corpus.CORPUS]
    return bad, good


@pytest.mark.parametrize("permissive", [False, True])
def test_corpus_block_and_false_positive_rates(ws: Path, permissive: bool) -> None:
    assert len(corpus.CORPUS) >= 60
    cfg = PolicyConfig(allow_binaries=corpus.PERMISSIVE_BINARIES if permissive else [])
    bad, good = _verdicts(cfg, ws)
    allowed = [c for (_, c, _), d in zip(corpus.CORPUS, bad, strict=True) if d.verdict is Verdict.ALLOW]
    assert allowed == []
    # with every binary allowlisted, the built-in rules must deny each dangerous command themselves
    missed = [c for (_, c, _), d in zip(corpus.CORPUS, bad, strict=True) if d.verdict is not Verdict.DENY]
    assert missed == []
    denied = [c for (_, _, c), d in zip(corpus.CORPUS, good, strict=True) if d.verdict is Verdict.DENY]
    assert len(denied) <= 0.02 * len(corpus.CORPUS), denied

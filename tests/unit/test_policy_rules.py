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
    assert len(corpus.CORPUS) >= 140
    corpus.prepare_workspace(ws)
    cfg = PolicyConfig(allow_binaries=corpus.PERMISSIVE_BINARIES if permissive else [])
    bad, good = _verdicts(cfg, ws)
    allowed = [c for (_, c, _), d in zip(corpus.CORPUS, bad, strict=True) if d.verdict is Verdict.ALLOW]
    assert allowed == []
    # with every binary allowlisted, the built-in rules must deny each dangerous command themselves
    # (or confirm, for the few whose effect the command line cannot show)
    missed = [
        c
        for (_, c, _), d in zip(corpus.CORPUS, bad, strict=True)
        if d.verdict is not Verdict.DENY and c not in corpus.CONFIRM_IS_ENOUGH
    ]
    assert missed == []
    denied = [c for (_, _, c), d in zip(corpus.CORPUS, good, strict=True) if d.verdict is Verdict.DENY]
    assert len(denied) <= 0.02 * len(corpus.CORPUS), denied


ALLOWLISTED = PolicyConfig(allow_binaries=corpus.PERMISSIVE_BINARIES)


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("""git -c alias.x='!python3 -c "import os"' x""", "builtin:git-exec"),
        ("git -calias.x=!sh x", "builtin:git-exec"),
        ("git --config-env=core.pager=EVIL log", "builtin:git-exec"),
        ("git config core.fsmonitor 'cmd'", "builtin:git-exec"),
        ("git config --add core.hooksPath .h", "builtin:git-exec"),
        ("git config set core.pager 'sh -c x'", "builtin:git-exec"),
        ("git config alias.st '!rm -rf ~'", "builtin:git-exec"),
        ("git config includeIf.gitdir:/.path ../evil.cfg", "builtin:git-exec"),
        ("git config diff.x.textconv 'sh -c id'", "builtin:git-exec"),
        ("git config merge.x.driver 'sh -c id'", "builtin:git-exec"),
        ("git config credential.helper '!id'", "builtin:git-exec"),
        ("git config gpg.program ./evil", "builtin:git-exec"),
        ("git config remote.origin.uploadpack ./evil", "builtin:git-exec"),
        ("git config protocol.ext.allow always", "builtin:git-exec"),
        ("git config -f .git/config user.name x", "builtin:protected"),
        ("git push --receive-pack=./evil origin", "builtin:git-exec"),
        ("git clone -u ./evil ./a ./b", "builtin:git-exec"),
        ("git clone -c core.fsmonitor=./evil ./a ./b", "builtin:git-exec"),
        ("git rebase --exec 'rm -rf ~' main", "builtin:outside-workspace"),
        ("git bisect run sh -c 'rm -rf /'", "builtin:outside-workspace"),
        ("find . -execdir sudo id ';'", "builtin:privilege"),
        ("find / -fls ./x", "builtin:outside-workspace"),
        ("tar -cf a.tar --checkpoint-action=exec='sudo id' .", "builtin:tar-exec"),
        ("ssh -oProxyCommand=id host.example", "builtin:ssh-exec"),
        ("scp -S ./evil a host.example:b", "builtin:ssh-exec"),
        ("sed 's/x/id/e' ./notes.md", "builtin:sed-exec"),
        ("sed -n '/a/w .git/hooks/pre-commit' ./notes.md", "builtin:protected"),
        ("awk '{print | \"sh\"}' ./notes.md", "builtin:awk-exec"),
        ("python3 -Ic 'import os; os.system(\"id\")'", "builtin:inline-code"),
        ("perl -pi -e 's/a/b/' .git/config", "builtin:protected"),
        ("ruby -e 'File.delete(\"/etc/hosts\")'", "builtin:inline-code"),
        ("python3 -m pip install ./x", "builtin:runs-project-code"),
        ("npx cowsay hi", "builtin:runs-project-code"),
        ("watch -n1 ls", "builtin:runs-command"),
    ],
)
def test_allowlisting_a_binary_never_allows_code_execution_through_it(
    ws: Path, command: str, rule: str
) -> None:
    decision = check("exec", {"command": command}, ws, ALLOWLISTED)
    assert decision.verdict is not Verdict.ALLOW, command
    assert decision.rule == rule, decision


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git log --oneline -5",
        "git -c color.ui=never -C . diff --stat",
        "git config --get-regexp '^alias\\.'",
        "git config core.fsmonitor",
        "git config --unset alias.st",
        "git commit -m 'fix: x'",
        "find . -name '*.md' -newer MEMORY.md",
        "tar -czf ./out.tgz ./notes",
        "sed -n '/^#/p; s/a/b/g' ./notes.md",
        "sed -e 's|/usr|/opt|' ./paths.txt",
        "awk -F, '$3 > 10 {print $1}' ./data.csv",
        "ssh -o BatchMode=yes host.example uptime",
        "echo ok > /dev/null 2>&1",
        "ls memory > ./index.txt",
    ],
)
def test_ordinary_uses_of_allowlisted_binaries_stay_allowed(ws: Path, command: str) -> None:
    decision = check("exec", {"command": command}, ws, ALLOWLISTED)
    assert decision.verdict is Verdict.ALLOW, decision


def test_inline_code_confirms_and_denies_what_it_can_see(ws: Path) -> None:
    corpus.prepare_workspace(ws)
    plain = check("exec", {"command": "python3 -c 'print(1)'"}, ws, ALLOWLISTED)
    assert (plain.verdict, plain.rule) == (Verdict.CONFIRM, "builtin:inline-code")
    reads = check("exec", {"command": "python3 -c 'print(open(\"/etc/hostname\").read())'"}, ws, ALLOWLISTED)
    assert reads.verdict is Verdict.CONFIRM
    wipes = check("exec", {"command": 'python3 -c \'open("MEMORY.md", "w")\''}, ws, ALLOWLISTED)
    assert wipes.verdict is Verdict.DENY
    stdin = check("exec", {"command": "python3 - <<EOF\nprint(1)\nEOF"}, ws, ALLOWLISTED)
    assert stdin.verdict is Verdict.CONFIRM


def test_redirections_are_checked_like_writes(ws: Path) -> None:
    corpus.prepare_workspace(ws)
    verdict = {c: check("exec", {"command": c}, ws, ALLOWLISTED) for c in [
        ": > MEMORY.md", ": >> MEMORY.md", "echo x > memory/new-topic.md", ": > memory/2026-11-02.md",
        "echo x <> mnemo.toml", "ls 2> .mnemo/audit.jsonl", "X=MEMORY.md; : > $X", ": > $UNKNOWN",
        "sort < ~/notes.txt", "cd memory; : > ../MEMORY.md", "cd .git && : > config", "> ./fresh.txt",
    ]}  # fmt: skip
    assert verdict[": > MEMORY.md"].rule == "builtin:memory-overwrite"
    assert verdict[": >> MEMORY.md"].verdict is Verdict.CONFIRM
    assert verdict["echo x > memory/new-topic.md"].verdict is Verdict.CONFIRM
    assert verdict[": > memory/2026-11-02.md"].verdict is Verdict.DENY
    assert verdict["echo x <> mnemo.toml"].rule == "builtin:protected"
    assert verdict["ls 2> .mnemo/audit.jsonl"].rule == "builtin:protected"
    assert verdict["X=MEMORY.md; : > $X"].verdict is Verdict.DENY
    assert verdict[": > $UNKNOWN"].rule == "builtin:variable-target"
    assert verdict["sort < ~/notes.txt"].rule == "builtin:read-outside"
    assert verdict["cd memory; : > ../MEMORY.md"].verdict is Verdict.DENY
    assert verdict["cd .git && : > config"].rule == "builtin:protected"
    assert verdict["> ./fresh.txt"].verdict is Verdict.ALLOW


def test_sensitive_assignments_are_refused(ws: Path) -> None:
    for command in ("CDPATH=/ cd root", "export LD_AUDIT=./x.so", "GIT_DIR=./evil git status",
                    "GIT_CONFIG_PARAMETERS=x git log", "read -r IFS < ./x", "export GIT_PAGER='sh -c id'"):  # fmt: skip
        assert check("exec", {"command": command}, ws, ALLOWLISTED).verdict is Verdict.DENY, command
    for command in ("GIT_PAGER=cat git log", "export GIT_AUTHOR_NAME=Ada", "LANG=C.UTF-8 ls"):
        assert check("exec", {"command": command}, ws, ALLOWLISTED).verdict is Verdict.ALLOW, command


def test_an_allow_rule_for_a_folder_does_not_reach_past_it_nor_into_what_the_host_runs(ws: Path) -> None:
    """An allow rule "notes/*" for write_file matched the path as written: "notes/../MEMORY.md",
    "notes/../skills/evil/SKILL.md" and "notes/../.vscode/settings.json" were written with nobody asked
    (VS Code then ran the mnemo.server.command written there, on the host)."""
    cfg = PolicyConfig.from_dict(
        {"rules": [{"tool": "write_file", "pattern": "notes/*", "decision": "allow"}]}
    )
    assert check("write_file", {"path": "notes/today.md"}, ws, cfg).verdict is Verdict.ALLOW
    for path in ("notes/../MEMORY.md", "notes/../skills/evil/SKILL.md", "notes/../memory/topic.md"):
        assert check("write_file", {"path": path}, ws, cfg).verdict is Verdict.CONFIRM, path
    for path in ("notes/../.vscode/settings.json", ".venv/bin/mnemo", ".devcontainer/devcontainer.json"):
        assert check("write_file", {"path": path}, ws, cfg).verdict is Verdict.DENY, path
    allowed = PolicyConfig(allow_binaries=["mkdir", "tee"])
    for command in ("mkdir -p .vscode", "echo '{}' > .vscode/tasks.json", "echo x | tee .venv/bin/mnemo"):
        assert check("exec", {"command": command}, ws, allowed).verdict is Verdict.DENY, command

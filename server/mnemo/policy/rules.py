"""Tool policy: allow / confirm / deny per tool and pattern, deny wins over confirm over allow.

The ``[policy]`` table of ``mnemo.toml``::

    [policy]
    network = false                     # the sandbox gets no network (exec runs with --unshare-net)
    network_domains = ["pypi.org", "*.pythonhosted.org"]  # or only these, through a filtering proxy
    network_hosts = {}                  # name -> address pinned instead of DNS (tests, intranet hosts)
    allow_binaries = ["git", "ls", "/usr/bin/rg"]   # names resolved with shutil.which, or absolute paths
    default = "confirm"                 # tools not listed in [policy.tools]

    [policy.tools]                      # fallback verdict per tool when no rule matches
    exec = "confirm"
    write_file = "confirm"

    [[policy.rules]]
    tool = "exec"                       # a tool name, or "*"
    pattern = "git status*"             # fnmatch glob: one exec segment, a workspace-relative path, or "*"
    decision = "allow"                  # allow | confirm | deny
    reason = "read-only git"            # optional

Every exec segment (see :mod:`mnemo.policy.shell`) is checked on its own and the strictest verdict wins;
for one segment the built-in rules (:mod:`mnemo.policy.destructive`, the per-binary argument rules of
:mod:`mnemo.policy.binaries`, the redirection checks of :mod:`mnemo.policy.targets`), the configured rules and
``allow_binaries`` all apply and the strictest match wins. The tool default applies only when nothing
matched. Built-in deny rules cannot be relaxed by configuration.
"""

from __future__ import annotations

import ipaddress
import json
import os
import tomllib
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from mnemo.policy import binaries, destructive, targets
from mnemo.policy.netproxy import NetworkAllowlist, check_domain, normalize_host
from mnemo.policy.shell import Segment, is_inside, parse_command, resolve_path
from mnemo.policy.verdict import Context, Decision, Verdict, strictest

READ_ONLY_TOOLS = ("memory_search", "memory_get", "read_file")
MAX_BASES = 8


@dataclass(frozen=True)
class Rule:
    tool: str
    pattern: str
    decision: Verdict
    reason: str = ""
    name: str = ""

    def matches(self, tool: str, subjects: list[str]) -> bool:
        if self.tool not in ("*", tool):
            return False
        return self.pattern in ("", "*") or any(fnmatchcase(s, self.pattern) for s in subjects)


@dataclass
class PolicyConfig:
    rules: list[Rule] = field(default_factory=list)
    allow_binaries: list[str] = field(default_factory=list)
    network: bool = False
    network_domains: list[str] = field(default_factory=list)
    """When set, sandboxed commands reach only these domains (``name``, ``*.name``), via the proxy of
    :mod:`mnemo.policy.netproxy`; other hosts are refused and audited."""
    network_hosts: dict[str, str] = field(default_factory=dict)
    tools: dict[str, Verdict] = field(
        default_factory=lambda: {
            **dict.fromkeys(READ_ONLY_TOOLS, Verdict.ALLOW),
            "write_file": Verdict.CONFIRM,
            "exec": Verdict.CONFIRM,
        }
    )
    default: Verdict = Verdict.CONFIRM

    @classmethod
    def from_dict(cls, raw: dict[str, Any], problems: list[str] | None = None) -> PolicyConfig:
        """Build from the ``[policy]`` table; bad entries are skipped and described in ``problems``."""
        problems = problems if problems is not None else []
        cfg = cls()
        for key, value in raw.items():
            try:
                if key == "network":
                    if not isinstance(value, bool):
                        raise ValueError("must be true or false")
                    cfg.network = value
                elif key in ("network_domains", "network_hosts"):
                    _network_setting(cfg, key, value, problems)
                elif key == "allow_binaries":
                    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                        raise ValueError("must be a list of strings")
                    cfg.allow_binaries = list(value)
                elif key == "default":
                    cfg.default = Verdict.parse(value)
                elif key == "tools":
                    if not isinstance(value, dict):
                        raise ValueError("must be a table")
                    for tool, verdict in value.items():
                        cfg.tools[tool] = Verdict.parse(verdict)
                elif key == "rules":
                    if not isinstance(value, list):
                        raise ValueError("must be an array of tables")
                    for i, item in enumerate(value):
                        try:
                            cfg.rules.append(_rule_from_dict(item, i))
                        except (ValueError, TypeError) as exc:
                            problems.append(f"policy.rules[{i}]: {exc}")
                else:
                    raise ValueError("unknown key")
            except (ValueError, TypeError) as exc:
                problems.append(f"policy.{key}: {exc}")
        return cfg

    def network_allowlist(self) -> NetworkAllowlist | None:
        """The filtered network of ``network_domains`` (None when it is empty)."""
        if not self.network_domains:
            return None
        return NetworkAllowlist(tuple(self.network_domains), dict(self.network_hosts))

    def allowed_binary_paths(self) -> set[str]:
        import shutil

        paths: set[str] = set()
        for entry in self.allow_binaries:
            found = entry if os.path.isabs(entry) else shutil.which(entry)
            if found:
                paths.add(os.path.realpath(found))
        return paths


def _network_setting(cfg: PolicyConfig, key: str, value: Any, problems: list[str]) -> None:
    """``network_domains`` (names, ``*.name``) or ``network_hosts`` (name -> IP address); bad entries are
    skipped and reported."""
    if key == "network_domains":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError("must be a list of strings")
        for entry in value:
            try:
                cfg.network_domains.append(check_domain(entry))
            except ValueError as exc:
                problems.append(f"policy.network_domains: {exc}")
        return
    if not isinstance(value, dict):
        raise ValueError('must be a table like {"name.test" = "127.0.0.1"}')
    for name, address in value.items():
        try:
            if not isinstance(address, str):
                raise TypeError(address)
            cfg.network_hosts[normalize_host(name)] = str(ipaddress.ip_address(address))
        except (TypeError, ValueError):
            problems.append(f"policy.network_hosts.{name}: {address!r} is not an IP address")


def _rule_from_dict(item: Any, index: int) -> Rule:
    if not isinstance(item, dict):
        raise ValueError("must be a table")
    unknown = set(item) - {"tool", "pattern", "decision", "reason"}
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    tool, pattern, reason = item.get("tool", "*"), item.get("pattern", "*"), item.get("reason", "")
    if not all(isinstance(v, str) for v in (tool, pattern, reason)):
        raise ValueError("tool, pattern and reason must be strings")
    return Rule(tool, pattern, Verdict.parse(item.get("decision", "")), reason, f"config:rules[{index}]")


def load_policy(workspace: Path, problems: list[str] | None = None) -> PolicyConfig:
    """Read the ``[policy]`` table of ``<workspace>/mnemo.toml`` (defaults when absent or unreadable)."""
    problems = problems if problems is not None else []
    try:
        raw = tomllib.loads((workspace / "mnemo.toml").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return PolicyConfig()
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        problems.append(f"mnemo.toml: {exc}")
        return PolicyConfig()
    table = raw.get("policy", {})
    return PolicyConfig.from_dict(table if isinstance(table, dict) else {}, problems)


def append_allow_rule(toml_text: str, tool: str, pattern: str, reason: str = "always allowed") -> str:
    """Return ``toml_text`` with a new ``[[policy.rules]]`` allow table appended at the end.

    The existing text (comments, layout) is kept byte for byte. Raises ValueError when the pattern is
    too broad for a side-effect tool or when the result would not parse (e.g. ``rules = [...]`` inline).
    """
    if tool not in READ_ONLY_TOOLS and pattern.strip() in ("", "*", "**"):
        raise ValueError(f"refusing to always allow every {tool} call")
    block = (
        "\n[[policy.rules]]\n"
        f"tool = {json.dumps(tool, ensure_ascii=False)}\n"
        f"pattern = {json.dumps(pattern, ensure_ascii=False)}\n"
        'decision = "allow"\n'
        f"reason = {json.dumps(reason, ensure_ascii=False)}\n"
    )
    text = toml_text if not toml_text or toml_text.endswith("\n") else toml_text + "\n"
    result = text + block
    try:
        tomllib.loads(result)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"cannot append a rule to this mnemo.toml: {exc}") from exc
    return result


def check(tool: str, args: dict[str, Any], workspace: Path, config: PolicyConfig | None = None) -> Decision:
    """Decide whether ``tool`` may run with ``args`` in ``workspace``."""
    cfg = config or PolicyConfig()
    ws = Path(os.path.realpath(workspace))
    fallback = Decision(cfg.tools.get(tool, cfg.default), f"default:{tool}", f"default for {tool}")
    if tool == "exec":
        command = args.get("command", "")
        if not isinstance(command, str) or not command.strip():
            return Decision(Verdict.DENY, "shell:syntax", "exec needs a non-empty command string")
        return check_command(command, ws, cfg)
    hits: list[Decision] = []
    subjects = ["*"]
    if tool in ("write_file", "read_file"):
        raw_path = args.get("path", "")
        if not isinstance(raw_path, str) or not raw_path:
            return Decision(Verdict.DENY, "builtin:bad-args", f"{tool} needs a path")
        target = resolve_path(raw_path, ws)
        inside = is_inside(target, ws)
        subjects = [os.path.relpath(target, ws) if inside else str(target), raw_path]
        hits.extend(destructive.check_path(tool, raw_path, target, inside, ws))
    for rule in cfg.rules:
        # An allow rule sees the path resolved only: "notes/*" matched the text "notes/../MEMORY.md".
        seen = subjects[:1] if rule.decision is Verdict.ALLOW else subjects
        if rule.matches(tool, seen):
            hits.append(Decision(rule.decision, rule.name, rule.reason or f"matches {rule.pattern!r}"))
    return strictest(hits) or fallback


def check_command(command: str, ws: Path, cfg: PolicyConfig, depth: int = 0) -> Decision:
    """Check a whole command line: every segment, the strictest verdict wins.

    After a ``cd`` the later segments are checked from every folder the line may be in by then (the
    workspace included, in case the ``cd`` failed), and the strictest verdict wins.
    """
    parsed = parse_command(command, ws)
    if parsed.refusals:
        rule, reason = parsed.refusals[0]
        return Decision(Verdict.DENY, rule, reason)
    allowed = cfg.allowed_binary_paths()

    def recurse(inner: str) -> Decision:
        if depth >= 3:
            return Decision(Verdict.DENY, "builtin:nesting", "commands nested too deeply")
        return check_command(inner, ws, cfg, depth + 1)

    results: list[Decision] = []
    bases = [ws]
    for index, seg in enumerate(parsed.segments):
        hits: list[Decision] = []
        for base in bases:
            ctx = Context(ws, base, depth, recurse)
            hits.extend(targets.check_redirects(seg, ctx))
            if seg.argv:
                hits.extend(destructive.check_segment(seg, parsed.segments[:index], ctx))
                hits.extend(binaries.check_binary(seg, ctx))
        if not seg.argv:
            results.extend(hits)
            continue
        hits.extend(_config_hits(seg, cfg, allowed))
        results.append(strictest(hits) or Decision(cfg.tools.get("exec", cfg.default), "default:exec", ""))
        bases = _after_cd(seg, bases, ws)
    decision = strictest(results)
    if decision is None:
        if any(seg.redirects for seg in parsed.segments):
            return Decision(Verdict.ALLOW, "builtin:shell-builtin", "a redirection inside the workspace")
        return Decision(Verdict.DENY, "shell:syntax", "no command to run")
    if decision.rule == "default:exec":
        return Decision(decision.verdict, "default:exec", "no rule matched; default for exec")
    return decision


def _after_cd(seg: Segment, bases: list[Path], ws: Path) -> list[Path]:
    """The folders the line may be in after ``seg`` (``cd``/``pushd`` into the workspace add one)."""
    if seg.name not in ("cd", "pushd"):
        return bases
    dirs = [a for a in seg.argv[1:] if not a.startswith("-")][:1]
    if not dirs or "$" in dirs[0]:
        return bases
    found = [resolve_path(dirs[0], b) for b in bases]
    new = [p for p in found if is_inside(p, ws) and p not in bases]
    return (bases + new)[:MAX_BASES]


def _config_hits(seg: Segment, cfg: PolicyConfig, allowed: set[str]) -> list[Decision]:
    subjects = [seg.text]
    if seg.binary:
        subjects.append(" ".join([seg.binary, *seg.argv[1:]]))
    hits = [
        Decision(rule.decision, rule.name, rule.reason or f"matches {rule.pattern!r}")
        for rule in cfg.rules
        if rule.tool in ("exec", "*") and rule.matches("exec", subjects)
    ]
    if seg.binary and os.path.realpath(seg.binary) in allowed:
        hits.append(Decision(Verdict.ALLOW, "allow_binaries", f"{seg.binary} is allowlisted"))
    return hits

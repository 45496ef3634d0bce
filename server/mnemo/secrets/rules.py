"""Secret-detection rules, loaded from the JSON data files beside this module.

Two rule files live in ``data/``: ``gitleaks_rules.json`` (converted from gitleaks' public rule set,
MIT, see ``data/LICENSE-gitleaks`` and ``data/NOTICE``) and ``mnemo_rules.json`` (our own rules plus
the allowlist of placeholders and documented example keys that applies to every rule).

Patterns use the ``regex`` module with ``regex.V1`` so that Go's scoped inline flags keep their
meaning (with simple case folding, as RE2). Keywords are matched with one stdlib ``re`` trie over the lowercased text, which is far
cheaper than one substring search per keyword.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import regex

DATA_FILES = ("gitleaks_rules.json", "mnemo_rules.json")
_FLAGS = regex.V1
# V1 makes (?i) full-case-folding, which is ~10x slower and not what Go's RE2 does; turn it off.
_SIMPLE_CASE = "(?-f)"


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """Compile a rule pattern: Go-like scoped inline flags (V1), simple case folding."""
    return regex.compile(_SIMPLE_CASE + pattern, _FLAGS)


@dataclass(frozen=True)
class Allowlist:
    """Values (or matches, or lines) that a rule must not report."""

    target: str  # "secret" | "match" | "line"
    regexes: tuple[regex.Pattern[str], ...] = ()
    stopwords: tuple[str, ...] = ()
    stopword_pattern: re.Pattern[str] | None = None  # one trie search instead of one per word

    @classmethod
    def build(cls, target: str, regexes: Iterable[regex.Pattern[str]], stopwords: Iterable[str]) -> Allowlist:
        words = tuple(sorted({w.lower() for w in stopwords}))
        pattern = re.compile(_trie_pattern(words)) if words else None
        return cls(target, tuple(regexes), words, pattern)

    def allows(self, secret: str, match: str, line: str) -> bool:
        subject = {"match": match, "line": line}.get(self.target, secret)
        if any(p.search(subject) for p in self.regexes):
            return True
        return self.stopword_pattern is not None and self.stopword_pattern.search(secret.lower()) is not None


@dataclass(frozen=True)
class Rule:
    id: str
    description: str
    pattern: regex.Pattern[str]
    keywords: tuple[str, ...]
    entropy: float = 0.0
    secret_group: int | str = 0
    priority: int = 1
    extend_left: int = 0
    multiline: bool = False
    anchor: bool = False  # the regex starts at one of its keywords: try it only there
    # Anchored rules: a cheap pattern that must occur within `precheck[1]` chars of the keyword.
    precheck: tuple[re.Pattern[str], int] | None = None
    require: tuple[str, ...] = ()
    allowlists: tuple[Allowlist, ...] = ()
    source: str = "mnemo"

    def secret_span(self, m: regex.Match[str]) -> tuple[int, int] | None:
        """The value's span: the configured group, else the first non-empty group (as gitleaks)."""
        if self.secret_group:
            start, end = m.span(self.secret_group)
            return (start, end) if start >= 0 and end > start else None
        for index in range(1, (m.re.groups or 0) + 1):
            start, end = m.span(index)
            if start >= 0 and end > start:
                return start, end
        return m.span() if m.end() > m.start() else None

    def value_ok(self, secret: str) -> bool:
        if self.entropy and shannon_entropy(secret) <= self.entropy:
            return False
        generic = self.entropy and self.source == "gitleaks" and self.id.startswith("generic")
        if generic and not any(c.isdigit() for c in secret):
            return False
        for need in self.require:
            if need == "letter" and not any(c.isalpha() for c in secret):
                return False
            if need == "digit" and not any(c.isdigit() for c in secret):
                return False
            if need == "digit_or_symbol" and secret.isalpha():
                return False
        return True


@dataclass
class RuleSet:
    rules: list[Rule]
    global_allowlist: Allowlist
    documented_examples: frozenset[str]
    line_marker: str
    dropped: list[dict[str, str]] = field(default_factory=list)
    keyword_pattern: re.Pattern[str] = field(init=False)
    implied: dict[str, tuple[tuple[str, int], ...]] = field(init=False)
    always: tuple[int, ...] = field(init=False)
    by_keyword: dict[str, tuple[int, ...]] = field(init=False)

    def __post_init__(self) -> None:
        keywords = sorted({k for rule in self.rules for k in rule.keywords})
        self.keyword_pattern = re.compile(_trie_pattern(keywords))
        # A keyword found in the text implies every keyword it contains ("sk_live" -> "sk" at +0).
        self.implied = {k: tuple((o, k.find(o)) for o in keywords if o in k) for k in keywords}
        self.always = tuple(i for i, rule in enumerate(self.rules) if not rule.keywords)
        self.by_keyword = {k: tuple(i for i, r in enumerate(self.rules) if k in r.keywords) for k in keywords}

    def is_allowed(self, rule: Rule, secret: str, match: str, line: str) -> bool:
        if secret in self.documented_examples:
            return True
        if self.global_allowlist.allows(secret, match, line):
            return True
        return any(al.allows(secret, match, line) for al in rule.allowlists)


def shannon_entropy(value: str) -> float:
    """Shannon entropy in bits per character, as gitleaks computes it."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _trie_pattern(words: Iterable[str]) -> str:
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie) or "(?!)"


def _allowlist(raw: dict[str, Any]) -> Allowlist:
    return Allowlist.build(
        raw.get("target", "secret"),
        (compile_pattern(p) for p in raw.get("regexes", [])),
        raw.get("stopwords", []),
    )


def _rule(raw: dict[str, Any], source: str) -> Rule:
    pattern = compile_pattern(raw["regex"])
    group: int | str = raw.get("secret_group", 0)
    if not group and "secret" in pattern.groupindex:
        group = "secret"
    return Rule(
        id=raw["id"],
        description=raw.get("description", raw["id"]),
        pattern=pattern,
        keywords=tuple(k.lower() for k in raw.get("keywords", [])),
        entropy=float(raw.get("entropy", 0.0)),
        secret_group=group,
        priority=int(raw.get("priority", 1)),
        extend_left=int(raw.get("extend_left", 0)),
        multiline=bool(raw.get("multiline", False)) or "[\\s\\S" in raw["regex"],
        anchor=bool(raw.get("anchor", False)),
        precheck=(re.compile(raw["precheck"]), int(raw.get("precheck_window", 64)))
        if raw.get("precheck")
        else None,
        require=tuple(raw.get("require", [])),
        allowlists=tuple(_allowlist(a) for a in raw.get("allowlists", [])),
        source=source,
    )


def build_ruleset(documents: Sequence[dict[str, Any]]) -> RuleSet:
    """Build a rule set from parsed rule documents (the shapes of the files in ``data/``)."""
    rules: list[Rule] = []
    regexes: list[regex.Pattern[str]] = []
    stopwords: list[str] = []
    examples: set[str] = set()
    dropped: list[dict[str, str]] = []
    marker = "mnemo: allow-secret"
    for doc in documents:
        source = "gitleaks" if "gitleaks" in str(doc.get("source", "")) else "mnemo"
        for raw in doc.get("rules", []):
            try:
                rules.append(_rule(raw, source))
            except regex.error as exc:  # keep going: a bad rule must not disable scanning
                dropped.append({"id": str(raw.get("id")), "reason": str(exc)})
        dropped.extend(doc.get("dropped", []))
        allow = doc.get("global_allowlist") or doc.get("allowlist") or {}
        regexes.extend(compile_pattern(p) for p in allow.get("regexes", []))
        stopwords.extend(s.lower() for s in allow.get("stopwords", []))
        examples.update(allow.get("documented_examples", []))
        marker = allow.get("line_marker", marker)
    return RuleSet(
        rules=rules,
        global_allowlist=Allowlist.build("secret", regexes, stopwords),
        documented_examples=frozenset(examples),
        line_marker=marker,
        dropped=dropped,
    )


@lru_cache(maxsize=1)
def default_ruleset() -> RuleSet:
    """The packaged rules (loaded and compiled once per process)."""
    data = resources.files("mnemo.secrets").joinpath("data")
    docs = [json.loads(data.joinpath(name).read_text(encoding="utf-8")) for name in DATA_FILES]
    return build_ruleset(docs)

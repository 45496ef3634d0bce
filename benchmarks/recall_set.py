"""A generated, seeded development set for memory recall: notes the way people keep them, questions people ask.

``build(seed)`` returns a workspace (``{relative path: text}``) and its questions. The workspace holds:

- ``MEMORY.md``: loose evergreen lines about the same topics the questions ask about ("The billing service
  uses PostgreSQL") - near misses for questions about details;
- ``memory/YYYY-MM-DD.md``: six months of daily notes (English, Chinese, both), each fact inside ``##`` sections
  next to filler work-log lines that share topic words with it;
- facts instantiated for several entities (the billing, search and payments services...), so every answer has
  near-duplicate distractors that differ only in the entity;
- facts updated two or three times months apart (the newest must come first and stay in the list);
- topic notes with heading-only sections (``# On-call`` straight before ``## Weekdays``);
- ``sessions/*.jsonl`` chat transcripts in which the user asked the same question and the model answered
  wrongly (they must not outrank the note);
- old, unique answers (a fact stated once, five months ago).

Questions are paraphrases that share few words with their note. Every question has exactly one expected
statement (path + a value string only that statement contains); for updated facts the older versions are
listed too (to measure how often the newest ranks first).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

TODAY = date(2026, 11, 30)
START = TODAY - timedelta(days=182)

SERVICES = ["billing", "search", "payments", "notifications", "inventory"]
SERVICES_ZH = {
    "billing": "账单",
    "search": "搜索",
    "payments": "支付",
    "notifications": "通知",
    "inventory": "库存",
}
PEOPLE = [
    "Alice",
    "Bruno",
    "Chen Wei",
    "Dana",
    "Elif",
    "Farid",
    "Greta",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemal",
    "Lena",
]
PROJECTS = ["Atlas", "Beacon", "Comet", "Delta", "Echo"]
DATABASES = ["PostgreSQL", "CockroachDB", "MySQL", "DynamoDB", "MongoDB"]
CITIES = ["Lisbon", "Porto", "Krakow", "Tallinn", "Valencia", "Ghent", "Leipzig", "Turin"]
CAUSES = [
    ("the migration ran before the config map was mounted", "迁移脚本在配置加载前执行"),
    ("the health check timed out while the cache warmed up", "缓存预热时健康检查超时"),
    ("a expired registry token blocked the image pull", "镜像仓库令牌过期导致拉取失败"),
    ("the new env var was missing from the helm values", "helm 配置里缺少新的环境变量"),
    ("disk pressure evicted the worker pods", "磁盘压力导致 worker 被驱逐"),
]
FIXES_ZH = [
    "给 invoice 表加了复合索引",
    "把报表查询改成了物化视图",
    "加了 Redis 结果缓存",
    "把分页改成了游标分页",
    "拆分了大事务",
]

FILLER_EN = [
    "Reviewed {p}'s pull request for the {s} service; mostly naming nits.",
    "Sprint planning ran long; we moved two {s} tickets to next week.",
    "Paired with {p} on flaky tests in the {s} pipeline.",
    "The {s} dashboard needs better alerts; added a ticket.",
    "Lunch with {p}; talked about the {proj} roadmap and hiring.",
    "Read the postmortem draft for the {s} incident; left comments.",
    "Cleaned up old feature flags in {proj}.",
    "Wrote the weekly update for {proj}: on track, one risk around the {s} database.",
    "Interviewed a backend candidate with {p}; strong on databases.",
    "Updated the runbook for restarting the {s} workers.",
]
FILLER_ZH = [
    "和{p}一起排查了{s}服务的告警。",
    "整理了{proj}的需求文档，下周评审。",
    "{s}服务的日志量太大，需要调整采样率。",
    "今天主要在写{proj}的单元测试。",
]


@dataclass
class Statement:
    path: str
    value: str
    """A string only this statement contains (a hit is the chunk at ``path`` whose lines contain it)."""


def holds(ws: Path, lines: dict[str, list[str]], hit: Any, st: Statement) -> bool:
    """Whether search hit ``hit`` (path + line span) states ``st``; ``lines`` caches the files read."""
    if hit.path != st.path:
        return False
    if hit.path not in lines:
        lines[hit.path] = (ws / hit.path).read_text(encoding="utf-8").splitlines()
    return st.value in "\n".join(lines[hit.path][hit.start_line - 1 : hit.end_line])


@dataclass
class Question:
    text: str
    category: str
    answer: Statement
    older: list[Statement] = field(default_factory=list)
    """Earlier versions of an updated fact, oldest first."""
    session: str = ""
    """A transcript in which the user asked this and the model answered wrongly ("" when none)."""


@dataclass
class _Builder:
    rng: random.Random
    days: dict[date, list[tuple[str, list[str]]]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    questions: list[Question] = field(default_factory=list)

    def day(self, ago: int) -> date:
        return TODAY - timedelta(days=ago)

    def note(self, day: date, heading: str, lines: list[str]) -> str:
        self.days.setdefault(day, []).append((heading, lines))
        return f"memory/{day.isoformat()}.md"

    def filler(self, zh: bool = False) -> str:
        pool = FILLER_ZH if zh else FILLER_EN
        p, s, proj = self.rng.choice(PEOPLE), self.rng.choice(SERVICES), self.rng.choice(PROJECTS)
        return self.rng.choice(pool).format(p=p, s=SERVICES_ZH[s] if zh else s, proj=proj)

    def fact(self, ago: int, heading: str, text: str, value: str, *, zh: bool = False) -> Statement:
        lines = [f"- {self.filler(zh)}", f"- {text}", f"- {self.filler(zh)}"]
        self.rng.shuffle(lines)
        return Statement(self.note(self.day(ago), heading, lines), value)

    def ask(self, text: str, category: str, answer: Statement, older: list[Statement] | None = None) -> None:
        self.questions.append(Question(text, category, answer, older or []))


def _unique_en(b: _Builder) -> None:
    rng = b.rng
    for i, svc in enumerate(SERVICES):
        proj = PROJECTS[i]
        p1, _p2 = rng.sample(PEOPLE, 2)
        cause_en, _ = CAUSES[i]
        old = i % 2 == 0  # half the unique answers are five months old

        def ago(old: bool = old) -> int:
            return rng.randrange(140, 175) if old else rng.randrange(3, 60)

        s = b.fact(
            ago(),
            "Tooling",
            f"For {proj} we settled on Ruff{i} to both format and lint the code.",
            f"Ruff{i}",
        )
        b.ask(f"which formatter and linter do I use for {proj}", "paraphrase", s)
        s = b.fact(ago(), "Incidents", f"The {svc} staging release broke: {cause_en}.", cause_en)
        b.ask(f"why did the {svc} rollout to staging fail", "paraphrase", s)
        port = f"pgbouncer on port {6430 + i}"
        s = b.fact(ago(), "Infra", f"Put {port} in front of the {svc} Postgres, transaction mode.", port)
        b.ask(f"connection pooler for the {svc} database", "memory-near-miss", s)
        limit = f"{rng.randrange(2, 9) * 100} requests a minute"
        s = b.fact(
            ago(),
            "API",
            f"{proj} public API: clients are throttled at {limit} per key.",
            f"{proj} public API: clients are throttled at {limit}",
        )
        b.ask(f"how many calls can one client make to {proj} per minute", "paraphrase", s)
        when = f"{rng.randrange(1, 4)}:{rng.choice(['15', '30', '45'])} am UTC"
        s = b.fact(
            ago(),
            "Ops",
            f"The {svc} snapshots are copied to cold storage nightly at {when}.",
            f"{svc} snapshots are copied to cold storage nightly at {when}",
        )
        b.ask(f"what time do the {svc} backups run", "paraphrase", s)
        kid = rng.choice(["Mila", "Noah", "Yuki", "Omar", "Sofia"]) + f" ({i + 3} years old)"
        s = b.fact(ago(), "People", f"{p1} has a daughter, {kid}.", kid)
        b.ask(f"what's the name of {p1}'s kid", "paraphrase", s)


def _updated(b: _Builder) -> None:
    rng = b.rng
    for i, svc in enumerate(SERVICES):
        dbs = rng.sample(DATABASES, 3)
        n = 2 + i % 2
        agos = sorted(rng.sample(range(5, 170), n), reverse=True)
        versions = [
            b.fact(
                agos[0],
                "Decisions",
                f"Decision: the {svc} database will be {dbs[0]} ({svc}).",
                f"{dbs[0]} ({svc})",
            )
        ]
        for k in range(1, n):
            word = "Final decision" if k == n - 1 else "Update"
            versions.append(
                b.fact(
                    agos[k],
                    "Decisions",
                    f"{word}: we are moving the {svc} database to {dbs[k]} ({svc}).",
                    f"{dbs[k]} ({svc})",
                )
            )
        b.ask(f"what did we decide about the {svc} database", "updated", versions[-1], versions[:-1])
        team = PROJECTS[i]
        leads = rng.sample(PEOPLE, n)
        agos = sorted(rng.sample(range(5, 170), n), reverse=True)
        vs = [
            b.fact(
                a,
                "Team",
                f"{lead} is now the on-call lead for the {team} team.",
                f"{lead} is now the on-call lead for the {team}",
            )
            for a, lead in zip(agos, leads, strict=True)
        ]
        b.ask(f"who leads on-call for {team}", "updated", vs[-1], vs[:-1])
        agos = sorted(rng.sample(range(5, 170), n), reverse=True)
        cities = rng.sample(CITIES, n)
        vs = [
            b.fact(
                a,
                "Offsite",
                f"{team} offsite: we booked a venue in {c}.",
                f"{team} offsite: we booked a venue in {c}",
            )
            for a, c in zip(agos, cities, strict=True)
        ]
        b.ask(f"where is the {team} team offsite", "updated", vs[-1], vs[:-1])


def _chinese(b: _Builder) -> None:
    rng = b.rng
    for i, svc in enumerate(SERVICES):
        zh = SERVICES_ZH[svc]
        _, cause_zh = CAUSES[i]
        s = b.fact(rng.randrange(4, 9), "部署", f"{zh}服务上线失败：{cause_zh}，已回滚。", cause_zh, zh=True)
        b.ask(f"上周{zh}的部署问题是什么", "chinese", s)
        fix = FIXES_ZH[i]
        s = b.fact(
            rng.randrange(10, 170), "性能", f"{zh}查询优化：{fix}，耗时从 3 秒降到 200 毫秒。", fix, zh=True
        )
        b.ask(f"{zh}查询性能优化做了什么", "chinese", s)
        proj = PROJECTS[i]
        owner = rng.choice(PEOPLE)
        s = b.fact(
            rng.randrange(10, 170),
            "分工",
            f"{proj} 的前端由 {owner} 负责。",
            f"{proj} 的前端由 {owner} 负责",
            zh=True,
        )
        b.ask(f"谁负责 {proj} 的前端", "chinese", s)
        ttl = f"TTL 设为 {rng.randrange(2, 12) * 5} 分钟"
        s = b.fact(rng.randrange(10, 170), "Cache", f"{svc} 的 Redis 缓存 {ttl}。", ttl, zh=True)
        b.ask(f"{svc} Redis cache 过期时间是多少", "mixed", s)


def _topic_notes(b: _Builder) -> None:
    rng = b.rng
    for i, proj in enumerate(PROJECTS[:4]):
        weekday, weekend = rng.sample(PEOPLE, 2)
        path = f"memory/{proj.lower()}-oncall.md"
        b.files[path] = (
            f"# On-call for {proj}\n\n## Weekdays\n\n- {weekday} carries the pager Monday to Friday for {proj}.\n\n"
            f"## Weekends\n\n- {weekend} covers Saturday and Sunday for {proj}.\n"
        )
        b.ask(
            f"who is on call during the week for {proj}",
            "heading-only",
            Statement(path, weekday + " carries"),
        )
        path = f"memory/{proj.lower()}-release.md"
        b.files[path] = (
            f"# {proj} release\n\n## Steps\n\n### Tagging\n\n"
            f"Run `make release-{i}` and push the tag; CI for {proj} publishes the build.\n"
        )
        b.ask(f"how do I ship a new version of {proj}", "heading-only", Statement(path, f"make release-{i}"))


def _memory_md(b: _Builder) -> None:
    lines = ["# Memory", "", "## Facts"]
    lines += [f"- The {svc} service uses PostgreSQL." for svc in SERVICES]
    lines += [f"- {proj} has a public API and an on-call rotation." for proj in PROJECTS]
    lines += ["- We deploy every service to staging first.", "- Backups matter; test restores.", ""]
    lines += [
        "## Preferences",
        "- Prefer small pull requests.",
        "- Python code is formatted automatically.",
        "",
    ]
    b.files["MEMORY.md"] = "\n".join(lines)


def _sessions(b: _Builder) -> None:
    """Transcripts: the user asked a third of the questions before, the model answered wrongly."""
    for n, q in enumerate(b.questions[::3]):
        sid = f"2026-11-{1 + n % 28:02d}-chat{n}"
        events = [
            {"type": "session", "text": "", "ts": "2026-11-20T10:00:00Z", "seq": 0},
            {"type": "user", "text": q.text + "?", "ts": "2026-11-20T10:00:01Z", "seq": 1},
            {
                "type": "assistant",
                "text": f"I am not sure; I think it was about {q.text.split()[-1]} last year.",
                "ts": "2026-11-20T10:00:05Z",
                "seq": 2,
            },
        ]
        path = f"sessions/{sid}.jsonl"
        b.files[path] = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)
        q.session = path


def build(seed: int = 20) -> tuple[dict[str, str], list[Question]]:
    b = _Builder(random.Random(seed))
    _unique_en(b)
    _updated(b)
    _chinese(b)
    _topic_notes(b)
    _memory_md(b)
    _sessions(b)
    for d in range(0, (TODAY - START).days, 2):  # a filler note every other day
        day = START + timedelta(days=d)
        zh = b.rng.random() < 0.3
        b.note(day, "日志" if zh else "Log", [f"- {b.filler(zh)}" for _ in range(b.rng.randint(2, 4))])
    for day, sections in sorted(b.days.items()):
        b.rng.shuffle(sections)
        out = [f"# {day.isoformat()}", ""]
        for heading, lines in sections:
            out += [f"## {heading}", "", *lines, ""]
        b.files[f"memory/{day.isoformat()}.md"] = "\n".join(out)
    b.files["skills/release/SKILL.md"] = (
        "---\nname: release\ndescription: Release a project\n---\n# Release\n\nFollow the project's release note.\n"
    )
    return b.files, b.questions

"""The chat benchmark's workspace and questions (benchmarks/bench_chat.py).

Facts in MEMORY.md, dated notes and topic notes; three were updated by a later note (the old value is
still in memory). Questions in English and Chinese: ``expect`` lists the words of the right fact (any
one counts; for an updated fact, the new value only), ``stale`` the superseded value, ``path`` the note
that holds it; ``path = None``: memory has no answer and the reply must say so.
"""

from __future__ import annotations

from dataclasses import dataclass

FILES: dict[str, str] = {
    "AGENTS.md": "# Agent persona\n\nYou are mnemo, a concise assistant that remembers. Cite memory as path#Lx-Ly.\n",
    "MEMORY.md": (
        "# Memory\n\n## Decisions\n- Billing database: CockroachDB, for multi-region writes.\n"
        "- Frontend framework: Svelte.\n\n## People\n- Alice leads the payments team.\n"
        "- Bob is the on-call lead for infrastructure.\n- 王芳负责移动端应用。\n\n"
        "## Preferences\n- Coffee: dark roast, no sugar.\n- Code review: small pull requests, one approval.\n"
    ),
    "memory/2026-10-01.md": (
        "# 2026-10-01\n\n- The staging cluster runs in Frankfurt.\n- Release train: every second Tuesday.\n"
    ),
    "memory/2026-11-20.md": (
        "# 2026-11-20\n\n## Decisions\n- Billing moves from CockroachDB to PostgreSQL 16: row-level security "
        "matters more than multi-region writes.\n- The staging cluster moved from Frankfurt to Dublin.\n"
    ),
    "memory/2026-11-22.md": (
        "# 2026-11-22\n\n- Release train changed: releases now ship every Thursday.\n"
        "- 订单系统迁移到新的数据库集群，明年一月完成。\n"
    ),
    "memory/deploy-runbook.md": (
        "# Deploy runbook\n\n- Deploys need a green CI run and one approval.\n"
        "- Roll back with `make rollback`; it restores the previous image.\n"
        "- The staging deploy once failed because the migration ran before the config was loaded.\n"
    ),
    "memory/项目笔记.md": (
        "# 项目笔记\n\n- API 设计评审定在下周三。\n- 服务器监控使用 Prometheus 和 Grafana。\n"
        "- 测试覆盖率目标是百分之八十。\n"
    ),
    "memory/gardening.md": "# Gardening\n\n- Tomatoes need full sun; basil grows well next to them.\n",
}


@dataclass(frozen=True)
class Question:
    text: str
    expect: tuple[str, ...] = ()
    path: str | None = None
    stale: tuple[str, ...] = ()


NOT_IN_MEMORY = (
    "don't have", "do not have", "not in memory", "not in the memory", "no information", "not sure", "没有",
    "不知道",
)  # fmt: skip

QUESTIONS: list[Question] = [
    Question("Which database does billing use?", ("PostgreSQL",), "memory/2026-11-20.md", ("CockroachDB",)),
    Question("Where does the staging cluster run?", ("Dublin",), "memory/2026-11-20.md", ("Frankfurt",)),
    Question("How often do releases ship?", ("Thursday",), "memory/2026-11-22.md", ("second Tuesday",)),
    Question("Who leads the payments team?", ("Alice",), "MEMORY.md"),
    Question("Who is the on-call lead for infrastructure?", ("Bob",), "MEMORY.md"),
    Question("Which frontend framework do we use?", ("Svelte",), "MEMORY.md"),
    Question("How do I take my coffee?", ("dark roast",), "MEMORY.md"),
    Question(
        "What does a deploy need before it can run?", ("green CI", "approval"), "memory/deploy-runbook.md"
    ),
    Question("How do I roll back a deploy?", ("make rollback",), "memory/deploy-runbook.md"),
    Question("Why did the staging deploy fail?", ("migration",), "memory/deploy-runbook.md"),
    Question("What do tomatoes need?", ("full sun",), "memory/gardening.md"),
    Question("What size should pull requests be?", ("small",), "MEMORY.md"),
    Question("Why did billing move to PostgreSQL?", ("row-level security",), "memory/2026-11-20.md"),
    Question("What grows well next to tomatoes?", ("basil",), "memory/gardening.md"),
    Question("谁负责移动端应用？", ("王芳",), "MEMORY.md"),
    Question("API 设计评审是什么时候？", ("下周三",), "memory/项目笔记.md"),
    Question("服务器监控用什么工具？", ("Prometheus", "Grafana"), "memory/项目笔记.md"),
    Question("测试覆盖率的目标是多少？", ("八十", "80"), "memory/项目笔记.md"),
    Question("订单系统什么时候完成迁移？", ("一月",), "memory/2026-11-22.md"),
    Question("账单系统用什么数据库？", ("PostgreSQL",), "memory/2026-11-20.md", ("CockroachDB",)),
    # Memory has no answer: the reply must say so.
    Question("What is the Wi-Fi password of the office?"),
    Question("Which cloud region hosts the analytics warehouse?"),
    Question("What is Carol's phone number?"),
    Question("When is the company offsite?"),
    Question("Which logging library does the mobile app use?"),
    Question("How many engineers work on search?"),
    Question("公司年会在哪里举行？"),
    Question("数据仓库用的是哪个云厂商？"),
    Question("前端团队的负责人是谁？"),
    Question("下个季度的预算是多少？"),
]

STATEMENTS: list[tuple[str, tuple[str, ...]]] = [
    ("Remember this: the on-call rotation changes every Monday at 10:00.", ("Monday",)),
    ("Remember this: the design system lives in the ui-kit repository.", ("ui-kit",)),
    ("记住：周报每周五下午五点前提交。", ("周五",)),
]
"""Sessions whose user states a new durable fact: what a flush should keep (and nothing else)."""

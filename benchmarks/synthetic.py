"""Deterministic synthetic memory workspaces for the engine benchmarks (English or Chinese).

A workspace of N files holds ``MEMORY.md``, dated daily notes ``memory/YYYY-MM-DD.md`` and snapshots
``memory/YYYY-MM-DD-slug.md`` spread over two years (2024-12-01 .. 2026-11-30), and undated topic notes
``memory/<slug>.md`` / ``memory/projects/<slug>.md``. Files have 20-60 lines with headings, lists, code fences
and prose. Known "needle" facts are planted in random files, each with a query whose answer is that file,
for sanity checks of search. The same (files, lang, seed) always gives byte-identical files.

    python benchmarks/synthetic.py --files 1000 --lang zh --out /tmp/ws-zh-1000
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

START = date(2024, 12, 1)
DAYS = 730

# -- English vocabulary ---------------------------------------------------------------------------------
EN_PEOPLE = [
    "Alice",
    "Bob",
    "Carol",
    "Dave",
    "Erin",
    "Frank",
    "Grace",
    "Heidi",
    "Ivan",
    "Judy",
    "Mallory",
    "Nina",
]
EN_PROJECTS = [
    "atlas",
    "billing",
    "checkout",
    "dashboard",
    "ingest",
    "mobile app",
    "search",
    "onboarding",
    "reporting",
    "payments",
    "gateway",
    "scheduler",
    "analytics",
    "notifications",
]
EN_NOUNS = [
    "migration",
    "release",
    "deploy",
    "schema",
    "test suite",
    "dependency",
    "cache",
    "query",
    "endpoint",
    "dashboard",
    "alert",
    "runbook",
    "budget",
    "roadmap",
    "design doc",
    "incident",
    "backlog",
    "benchmark",
    "config",
    "pipeline",
    "index",
    "rollout",
    "contract",
    "review",
]
EN_ADJ = [
    "flaky",
    "slow",
    "new",
    "legacy",
    "critical",
    "small",
    "large",
    "urgent",
    "stable",
    "noisy",
    "broken",
    "shared",
    "internal",
    "weekly",
    "quarterly",
]
EN_VERBS = [
    "reviewed",
    "fixed",
    "shipped",
    "planned",
    "discussed",
    "postponed",
    "rewrote",
    "measured",
    "profiled",
    "documented",
    "cleaned up",
    "split",
    "merged",
    "tested",
    "rolled back",
]
EN_BASE = [
    "review",
    "fix",
    "ship",
    "plan",
    "discuss",
    "postpone",
    "rewrite",
    "measure",
    "profile",
    "document",
    "clean up",
    "split",
    "merge",
    "test",
    "roll back",
]
EN_REASONS = [
    "because the numbers looked off",
    "after the standup",
    "since the vendor changed the API",
    "to unblock the team",
    "before the freeze",
    "as agreed with the customer",
    "while waiting for the build",
    "to cut the cloud bill",
]
EN_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next week", "tomorrow", "end of month"]

# -- Chinese vocabulary (common words, so that bigram keyword search has something real to match) -------
ZH_PEOPLE = ["张伟", "李娜", "王芳", "刘洋", "陈杰", "杨静", "赵磊", "黄敏", "周强", "徐丽", "孙涛", "马超"]
ZH_PROJECTS = [
    "支付系统",
    "搜索服务",
    "用户中心",
    "数据平台",
    "移动应用",
    "报表系统",
    "消息队列",
    "订单服务",
    "推荐系统",
    "监控平台",
    "客服系统",
    "会员系统",
]
ZH_NOUNS = [
    "数据库",
    "接口",
    "文档",
    "测试",
    "版本",
    "需求",
    "计划",
    "预算",
    "设计",
    "方案",
    "模型",
    "代码",
    "问题",
    "任务",
    "流程",
    "配置",
    "日志",
    "报告",
    "会议",
    "服务器",
    "缓存",
    "索引",
    "合同",
    "指标",
]
ZH_ADJ = ["重要", "详细", "初步", "最终", "稳定", "复杂", "简单", "紧急", "旧的", "新的", "临时", "长期"]
ZH_VERBS = [
    "讨论",
    "完成",
    "更新",
    "检查",
    "修复",
    "优化",
    "部署",
    "整理",
    "确认",
    "安排",
    "提交",
    "审核",
    "分析",
    "准备",
    "测试",
    "记录",
]
ZH_TIMES = ["上午", "下午", "晚上", "今天", "明天", "下周", "周一", "周三", "周五", "月底"]
ZH_ADV = ["已经", "需要", "可能", "应该", "马上", "继续", "重新", "一起"]
ZH_REASONS = [
    "因为客户提出了新的需求",
    "所以计划需要调整",
    "但是测试还没有通过",
    "然后再安排上线时间",
    "同时要注意服务器的性能",
    "因为上周的数据有问题",
    "为了降低成本",
    "按照团队的约定",
]

# -- Needle slots: words that the filler text never uses ----------------------------------------------
EN_N_PLACES = [
    "Vallorbe",
    "Kestrel Point",
    "Ardmore",
    "Quillon",
    "Brightwater",
    "Dunmore",
    "Halloway",
    "Marrowind",
    "Pellston",
    "Saltcombe",
    "Thornbury",
    "Wexcombe",
    "Yarrowdale",
    "Zennor",
]
EN_N_PEOPLE = [
    "Ingrid",
    "Tobias",
    "Lucinda",
    "Oswald",
    "Petra",
    "Rafferty",
    "Sunniva",
    "Thaddeus",
    "Ulrike",
    "Valentin",
    "Wilhelmina",
    "Xavier",
    "Yolanda",
    "Zebedee",
]
EN_N_OBJECTS = ["blue flowerpot", "doormat", "loose brick", "birdhouse", "red mailbox", "garden gnome"]
EN_N_TEAS = ["oolong", "rooibos", "genmaicha", "darjeeling", "lapsang souchong", "sencha"]
EN_N_TOOLS = ["Photoshop", "JetBrains", "Sketch", "Tableau", "AutoCAD", "Figma", "Ableton", "Unity"]
ZH_N_PLACES = ["杭州", "苏州", "成都", "厦门", "青岛", "大连", "昆明", "西安", "桂林", "拉萨", "洛阳", "丽江"]
ZH_N_PEOPLE = [
    "周子涵",
    "吴思远",
    "郑雨桐",
    "孙浩然",
    "钱梦琪",
    "冯嘉怡",
    "蒋一帆",
    "沈若溪",
    "韩晓东",
    "曹雅婷",
    "彭俊杰",
    "邓佳琪",
]
ZH_N_OBJECTS = ["花盆", "地毯", "门垫", "鞋柜", "信箱", "鱼缸"]
ZH_N_TEAS = ["龙井", "普洱", "铁观音", "碧螺春", "大红袍", "茉莉花茶"]
ZH_N_TOOLS = ["剪映", "钉钉", "飞书", "石墨文档", "金山办公", "有道云笔记", "印象笔记", "腾讯会议"]


@dataclass
class Needle:
    path: str
    fact: str
    query: str


@dataclass
class Spec:
    lang: str
    files: dict[str, str] = field(default_factory=dict)
    needles: list[Needle] = field(default_factory=list)

    def write(self, root: Path) -> None:
        for rel, text in self.files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


class _Words:
    def __init__(self, rng: random.Random, lang: str) -> None:
        self.rng, self.lang = rng, lang

    def sentence(self) -> str:
        r = self.rng
        if self.lang == "zh":
            form = r.randrange(3)
            if form == 0:
                return (
                    f"{r.choice(ZH_TIMES)}{r.choice(ZH_PEOPLE)}{r.choice(ZH_ADV)}{r.choice(ZH_VERBS)}了"
                    f"{r.choice(ZH_PROJECTS)}的{r.choice(ZH_ADJ)}{r.choice(ZH_NOUNS)}，{r.choice(ZH_REASONS)}。"
                )
            if form == 1:
                return (
                    f"{r.choice(ZH_PROJECTS)}的{r.choice(ZH_NOUNS)}{r.choice(ZH_ADV)}{r.choice(ZH_VERBS)}，"
                    f"{r.choice(ZH_PEOPLE)}负责{r.choice(ZH_NOUNS)}和{r.choice(ZH_NOUNS)}。"
                )
            return (
                f"和{r.choice(ZH_PEOPLE)}{r.choice(ZH_VERBS)}{r.choice(ZH_ADJ)}的{r.choice(ZH_NOUNS)}，"
                f"{r.choice(ZH_TIMES)}{r.choice(ZH_ADV)}{r.choice(ZH_VERBS)}{r.choice(ZH_NOUNS)}。"
            )
        form = r.randrange(3)
        if form == 0:
            return (
                f"{r.choice(EN_PEOPLE)} {r.choice(EN_VERBS)} the {r.choice(EN_ADJ)} {r.choice(EN_NOUNS)} "
                f"for {r.choice(EN_PROJECTS)} {r.choice(EN_REASONS)}."
            )
        if form == 1:
            return (
                f"We need to {r.choice(EN_BASE)} the {r.choice(EN_NOUNS)} of {r.choice(EN_PROJECTS)} "
                f"by {r.choice(EN_DAYS)}."
            )
        return (
            f"The {r.choice(EN_ADJ)} {r.choice(EN_NOUNS)} in {r.choice(EN_PROJECTS)} was "
            f"{r.choice(EN_VERBS)} {r.choice(EN_REASONS)}."
        )

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(2, 4)))

    def item(self) -> str:
        r = self.rng
        if self.lang == "zh":
            return f"- {r.choice(['[ ] ', '[x] ', ''])}{r.choice(ZH_VERBS)}{r.choice(ZH_PROJECTS)}的{r.choice(ZH_NOUNS)}"
        return f"- {r.choice(['[ ] ', '[x] ', ''])}{r.choice(EN_BASE)} the {r.choice(EN_NOUNS)} ({r.choice(EN_PROJECTS)})"

    def heading(self) -> str:
        r = self.rng
        if self.lang == "zh":
            return f"{r.choice(ZH_PROJECTS)}{r.choice(ZH_NOUNS)}"
        return f"{r.choice(EN_PROJECTS).title()} {r.choice(EN_NOUNS)}"

    def code(self) -> list[str]:
        r = self.rng
        if r.random() < 0.5:
            return [
                "```bash",
                f"make -C {r.choice(['server', 'web', 'infra'])} {r.choice(['test', 'deploy', 'bench'])}",
                f"kubectl rollout status deploy/{r.choice(['api', 'worker', 'cron'])} --timeout={r.randint(30, 300)}s",
                "```",
            ]
        return [
            "```python",
            f"def check_{r.choice(['rate', 'size', 'lag'])}(value: int) -> bool:",
            f"    return value < {r.randint(10, 5000)}",
            "```",
        ]


def _body(words: _Words, title: str, min_lines: int, max_lines: int) -> list[str]:
    rng = words.rng
    target = rng.randint(min_lines, max_lines)
    lines = [f"# {title}", ""]
    while len(lines) < target:
        roll = rng.random()
        if roll < 0.2:
            lines += [f"## {words.heading()}", ""]
        elif roll < 0.45:
            lines += [words.item() for _ in range(rng.randint(2, 5))] + [""]
        elif roll < 0.55:
            lines += [*words.code(), ""]
        else:
            lines += [words.paragraph(), ""]
    return lines


def _needle(rng: random.Random, lang: str, i: int) -> tuple[str, str]:
    """(fact sentence, query) for needle number ``i``; slot combinations are unique per i."""
    kind = i % 5
    j = i // 5
    if lang == "zh":
        place, person = ZH_N_PLACES[j % len(ZH_N_PLACES)], ZH_N_PEOPLE[j % len(ZH_N_PEOPLE)]
        tool, obj = ZH_N_TOOLS[j % len(ZH_N_TOOLS)], rng.choice(ZH_N_OBJECTS)
        code = f"{rng.choice('ABCDEFGHJK')}{rng.randint(1000, 9999)}"
        if kind == 0:
            return f"{place}仓库的备用钥匙放在{obj}下面。", f"{place}仓库的备用钥匙在哪里"
        if kind == 1:
            return f"{person}最喜欢的茶是{rng.choice(ZH_N_TEAS)}。", f"{person}喜欢喝什么茶"
        if kind == 2:
            return f"{tool}的许可证编号是{code}，第{j + 1}号账户。", f"{tool}第{j + 1}号账户的许可证编号"
        if kind == 3:
            return f"去{place}的航班从{rng.randint(10, 60)}号登机口出发。", f"去{place}的航班在哪个登机口"
        return f"{person}的女儿在{place}学习钢琴。", f"{person}的女儿在哪里学钢琴"
    place, person = EN_N_PLACES[j % len(EN_N_PLACES)], EN_N_PEOPLE[j % len(EN_N_PEOPLE)]
    tool, obj = EN_N_TOOLS[j % len(EN_N_TOOLS)], rng.choice(EN_N_OBJECTS)
    code = f"{rng.choice('ABCDEFGHJK')}{rng.randint(1000, 9999)}-{rng.randint(10, 99)}"
    if kind == 0:
        return (
            f"The spare key for the {place} storage unit is under the {obj}.",
            f"where is the spare key for the {place} storage unit",
        )
    if kind == 1:
        return f"{person}'s favourite tea is {rng.choice(EN_N_TEAS)}.", f"what tea does {person} like"
    if kind == 2:
        return f"The {tool} licence for seat {j + 1} is {code}.", f"{tool} licence key seat {j + 1}"
    if kind == 3:
        return (
            f"The flight to {place} leaves from gate {rng.randint(10, 60)}.",
            f"which gate does the flight to {place} leave from",
        )
    return (
        f"{person}'s daughter takes piano lessons in {place}.",
        f"where does {person}'s daughter take piano lessons",
    )


def generate(files: int, lang: str = "en", seed: int = 7, write_to: Path | None = None) -> Spec:
    """Build (and optionally write) a workspace of ``files`` Markdown files."""
    if lang not in ("en", "zh"):
        raise ValueError("lang must be en or zh")
    rng = random.Random(f"{seed}/{files}/{lang}")
    words = _Words(rng, lang)
    spec = Spec(lang)
    memory_lines = ["# MEMORY" if lang == "en" else "# 长期记忆", ""]
    memory_lines += _body(words, "Preferences" if lang == "en" else "偏好", 20, 40)[2:]
    spec.files["MEMORY.md"] = "\n".join(memory_lines) + "\n"
    rest = files - 1
    n_dated = round(rest * 0.7)
    n_topics = rest - n_dated
    days = [START + timedelta(days=d) for d in range(DAYS)]
    for k in range(n_dated):
        day = days[k % DAYS] if k < DAYS else days[rng.randrange(DAYS)]
        if k < DAYS:
            rel, title = f"memory/{day.isoformat()}.md", day.isoformat()
        else:
            slug = f"{rng.choice(['standup', 'retro', 'call', 'review', 'trip', 'notes'])}-{k}"
            rel, title = f"memory/{day.isoformat()}-{slug}.md", f"{day.isoformat()} {slug}"
        spec.files[rel] = "\n".join(_body(words, title, 20, 60)) + "\n"
    for k in range(n_topics):
        sub = "projects/" if k % 3 == 0 else ""
        rel = f"memory/{sub}topic-{k:05d}.md"
        spec.files[rel] = "\n".join(_body(words, words.heading(), 20, 60)) + "\n"
    paths = sorted(spec.files)
    n_needles = min(60, max(10, files // 4))
    for i in range(n_needles):
        fact, query = _needle(rng, lang, i)
        rel = rng.choice(paths)
        lines = spec.files[rel].splitlines()
        blanks = [k + 1 for k in range(1, len(lines)) if lines[k] == ""] or [len(lines)]
        at = rng.choice(blanks)  # after a blank line: never inside a code fence
        lines[at:at] = [fact, ""]
        spec.files[rel] = "\n".join(lines) + "\n"
        spec.needles.append(Needle(rel, fact, query))
    if write_to is not None:
        spec.write(write_to)
    return spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=100, help="number of files (default 100)")
    parser.add_argument("--lang", choices=["en", "zh"], default="en")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, required=True, help="workspace folder to write")
    args = parser.parse_args(argv)
    spec = generate(args.files, args.lang, args.seed, write_to=args.out)
    print(f"wrote {len(spec.files)} files and {len(spec.needles)} needles to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

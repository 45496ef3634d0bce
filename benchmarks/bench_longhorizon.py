"""Long-horizon recall: twelve months of daily notes with facts spread across them, some updated later.

The workspace (generated deterministically) holds one daily note per day, ``memory/2025-12-01.md`` ..
``memory/2026-11-30.md``, each with two or three ``##`` sections (topics of the day). Planted in them:

- unique facts, stated once on some day of the year (questions about them expect that statement);
- updated facts, stated two or three times months apart with a new value each time ("the Falcon team's office
  moved to Lisbon" ... "the Falcon team's office moved to Porto"); questions expect the newest statement.
  Half of these questions say "now"/"currently" (mnemo treats those as asking about recent events).

Every question is searched (5 results, min_score 0, today = 2026-11-30) with decay off, multiplicative and
supersede, in keyword (provider none) and hybrid (local MiniLM) modes. Reported: Hit@5 per category (unique
facts older than 180 days, unique facts from the last 180 days, updated facts), and for updated facts how often
the newest statement ranks above every older one ("newest first"; a miss counts as not first).
Hybrid vectors are cached in benchmarks/out/cache/ (quality benchmark, not a timing).

    python benchmarks/bench_longhorizon.py --modes keyword,hybrid
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (
    OUT,
    CachingEmbedder,
    command_line,
    install_embedder,
    machine,
    machine_line,
    md_table,
    write_outputs,
)
from benchmarks.synthetic import _Words

START = date(2025, 12, 1)
TODAY = date(2026, 11, 30)
DAYS = (TODAY - START).days + 1  # 365

CITIES = [
    "Lisbon",
    "Porto",
    "Krakow",
    "Tallinn",
    "Ljubljana",
    "Valencia",
    "Bergen",
    "Ghent",
    "Leipzig",
    "Turin",
    "Bilbao",
    "Aarhus",
    "Bratislava",
    "Cork",
    "Graz",
    "Lyon",
    "Malmo",
    "Nantes",
    "Riga",
    "Zagreb",
]
TEAMS = ["Falcon", "Otter", "Heron", "Lynx", "Marten", "Osprey", "Puffin", "Raven", "Stoat", "Wren"]
PEOPLE = [
    "Anneliese",
    "Bartholomew",
    "Cordelia",
    "Desmond",
    "Evangeline",
    "Fitzgerald",
    "Guinevere",
    "Horatio",
    "Isadora",
    "Jasper",
    "Leopold",
    "Marguerite",
    "Octavia",
    "Percival",
    "Rosalind",
    "Sebastian",
]
PROJECTS = [
    "Borealis",
    "Cascade",
    "Driftwood",
    "Ember",
    "Fjord",
    "Glacier",
    "Horizon",
    "Juniper",
    "Kestrel",
    "Lantern",
    "Meridian",
    "Nimbus",
]
VENDORS = ["Acme Hosting", "Bluepeak CRM", "Cobalt Mail", "Delta Backup", "Evergreen DNS", "Fathom Analytics"]
STREETS = [
    "Maple Street",
    "Harbour Road",
    "Elm Avenue",
    "Mill Lane",
    "Station Road",
    "Orchard Way",
    "Quay Street",
]
ROLES = ["tech lead", "product manager", "staff engineer", "designer", "data analyst"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October"]
DISHES = [
    "mushroom risotto",
    "lamb tagine",
    "pad thai",
    "shakshuka",
    "bouillabaisse",
    "pierogi",
    "moussaka",
    "ramen",
    "paella",
    "goulash",
    "bibimbap",
    "ceviche",
]
PETS = ["beagle", "tabby cat", "parrot", "corgi", "tortoise", "ferret"]
BOOKS = [
    "Middlemarch",
    "Dune",
    "Moby-Dick",
    "Beloved",
    "Ulysses",
    "Rebecca",
    "Persuasion",
    "Emma",
    "Solaris",
    "Kindred",
    "Stoner",
    "Ivanhoe",
]
SUPPLIERS = [
    "Granite Print",
    "Harbor Freight Co",
    "Ivory Catering",
    "Jetstream Travel",
    "Keystone Legal",
    "Lumen Lighting",
    "Monarch Office",
    "Northwind Coffee",
    "Orbit Telecom",
    "Pinnacle Cleaning",
    "Quartz Security",
    "Redwood Furniture",
]


@dataclass
class Statement:
    day: date
    heading: str
    text: str
    value: str
    """A string only this statement contains (how a hit is recognised)."""


@dataclass
class Question:
    text: str
    category: str  # unique-old | unique-recent | updated
    statements: list[Statement] = field(default_factory=list)
    """Oldest first; the last one is the expected answer."""


def _updated_templates(rng: random.Random, i: int) -> tuple[str, list[tuple[str, str]], str, str]:
    """(heading, [(statement text, value)] per version, question, question with 'now')."""
    kind = i % 6
    j = i // 6
    if kind == 0:
        team = TEAMS[j % len(TEAMS)]
        cities = rng.sample(CITIES, 3)
        return (
            "Office",
            [(f"The {team} team's office moved to {c}.", c) for c in cities],
            f"where is the {team} team's office",
            f"where is the {team} team's office now",
        )
    if kind == 1:
        person = PEOPLE[j % len(PEOPLE)]
        phones = [
            f"+351 {rng.randint(200, 999)} {rng.randint(100, 999)} {rng.randint(100, 999)}" for _ in range(3)
        ]
        return (
            "Contacts",
            [(f"{person}'s phone number changed to {p}.", p) for p in phones],
            f"what is {person}'s phone number",
            f"what is {person}'s current phone number",
        )
    if kind == 2:
        project = PROJECTS[j % len(PROJECTS)]
        dates = [f"{m} {rng.randint(2, 28)}" for m in rng.sample(MONTHS, 3)]
        return (
            "Release",
            [(f"The {project} launch is scheduled for {d}.", d) for d in dates],
            f"when is the {project} launch scheduled",
            f"when is the {project} launch scheduled now",
        )
    if kind == 3:
        person = PEOPLE[(j + 5) % len(PEOPLE)]
        teams = rng.sample(TEAMS, 3)
        roles = rng.sample(ROLES, 3)
        return (
            "People",
            [
                (f"{person} joined the {t} team as {r}.", f"{t} team as {r}")
                for t, r in zip(teams, roles, strict=True)
            ],
            f"which team is {person} on",
            f"which team is {person} on currently",
        )
    if kind == 4:
        vendor = VENDORS[j % len(VENDORS)]
        prices = [f"${rng.randint(12, 95)},{rng.randint(100, 999)}" for _ in range(3)]
        return (
            "Vendors",
            [(f"The {vendor} contract renewal costs {p} per year.", p) for p in prices],
            f"how much does the {vendor} contract cost",
            f"how much does the {vendor} contract cost now",
        )
    person = PEOPLE[(j + 9) % len(PEOPLE)]
    streets = [f"{rng.randint(3, 180)} {s}" for s in rng.sample(STREETS, 3)]
    return (
        "Personal",
        [(f"{person} moved to a new flat at {s}.", s) for s in streets],
        f"where does {person} live",
        f"where does {person} live now",
    )


def _unique_template(rng: random.Random, i: int) -> tuple[str, str, str, str]:
    """(heading, statement, value, question)."""
    kind = i % 6
    j = i // 6
    person = PEOPLE[(i * 7 + 3) % len(PEOPLE)]
    if kind == 0:
        code = f"{rng.choice('BCDFGHJKLMNPQRSTVWXZ')}{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
        project = PROJECTS[j % len(PROJECTS)]
        return (
            "Admin",
            f"The {project} grant reference number is {code}.",
            code,
            f"what is the {project} grant reference number",
        )
    if kind == 1:
        dish = DISHES[j % len(DISHES)]
        city = CITIES[(j * 3) % len(CITIES)]
        return (
            "Food",
            f"Best {dish} we had was at a small place in {city} near the old market.",
            city,
            f"where did we have the best {dish}",
        )
    if kind == 2:
        pet = PETS[j % len(PETS)]
        name = rng.choice(
            ["Biscuit", "Pepper", "Juniper", "Mochi", "Noodle", "Pickle", "Waffle", "Ziggy", "Tofu"]
        )
        name = f"{name} {['the First', 'the Second', 'the Bold', 'the Brave', 'the Quiet', 'Junior'][j % 6]}"
        return ("Home", f"{person}'s {pet} is called {name}.", name, f"what is the name of {person}'s {pet}")
    if kind == 3:
        book = BOOKS[j % len(BOOKS)]
        return (
            "Reading",
            f"Lent my copy of {book} to {person}; remember to ask for it back.",
            person,
            f"who did I lend {book} to",
        )
    if kind == 4:
        seat = f"row {rng.randint(5, 40)} seat {rng.choice('ABCDEF')}"
        city = CITIES[(j * 7 + 2) % len(CITIES)]
        return (
            "Travel",
            f"For the {city} conference trip I booked {seat} on the train.",
            seat,
            f"which seat did I book for the {city} conference trip",
        )
    vendor = SUPPLIERS[j % len(SUPPLIERS)]
    ticket = f"SR-{rng.randint(10000, 99999)}"
    return (
        "Support",
        f"Opened support ticket {ticket} with {vendor} about the invoice error.",
        ticket,
        f"what is the support ticket number with {vendor} about the invoice error",
    )


def build(
    seed: int, n_unique: int, n_updated: int, *, bare: bool = False
) -> tuple[dict[str, str], list[Question]]:
    rng = random.Random(seed)
    words = _Words(rng, "en")
    by_day: dict[date, list[Statement]] = {}
    questions: list[Question] = []
    for i in range(n_updated):
        heading, versions, q_plain, q_now = _updated_templates(rng, i)
        versions = versions[: rng.choice([2, 3])]
        first = rng.randrange(0, 120)
        days = [first]
        for _ in versions[1:]:
            days.append(min(DAYS - 1, days[-1] + rng.randrange(45, 140)))
        stmts = [
            Statement(START + timedelta(days=d), heading, t, v)
            for d, (t, v) in zip(days, versions, strict=True)
        ]
        for s in stmts:
            by_day.setdefault(s.day, []).append(s)
        questions.append(Question(q_now if i % 2 else q_plain, "updated", stmts))
    for i in range(n_unique):
        heading, text, value, question = _unique_template(rng, i)
        day = START + timedelta(days=rng.randrange(DAYS))
        s = Statement(day, heading, text, value)
        by_day.setdefault(day, []).append(s)
        age = (TODAY - day).days
        questions.append(Question(question, "unique-old" if age > 180 else "unique-recent", [s]))
    files: dict[str, str] = {}
    for d in range(DAYS):
        day = START + timedelta(days=d)
        sections: list[list[str]] = []
        for s in by_day.get(day, []):
            context = words.sentence()  # drawn even when bare, so the filler is the same in both variants
            sections.append([f"## {s.heading}", "", s.text if bare else f"{s.text} {context}"])
        for _ in range(max(0, rng.randint(2, 3) - len(sections))):
            body = (
                [words.paragraph()]
                if rng.random() < 0.6
                else [words.item() for _ in range(rng.randint(2, 4))]
            )
            sections.append([f"## {words.heading()}", "", *body])
        rng.shuffle(sections)
        lines = [f"# {day.isoformat()}", ""]
        for sec in sections:
            lines += [*sec, ""]
        files[f"memory/{day.isoformat()}.md"] = "\n".join(lines)
    return files, questions


def contains(hit_snippet: str, hit_path: str, s: Statement) -> bool:
    return hit_path == f"memory/{s.day.isoformat()}.md" and s.value in hit_snippet


def evaluate(memory: object, questions: list[Question], decay: str) -> dict[str, object]:
    memory.settings.search.decay = decay  # type: ignore[attr-defined]
    stats: dict[str, list[int]] = {}
    newest_first: list[int] = []
    flagged: list[int] = []
    for q in questions:
        out = memory.search(q.text, max_results=5, min_score=0.0, today=TODAY)  # type: ignore[attr-defined]
        target = q.statements[-1]
        hit = any(contains(h.snippet, h.path, target) for h in out.results[:5])
        stats.setdefault(q.category, []).append(int(hit))
        if q.category == "updated":
            first = next(
                (s for h in out.results for s in reversed(q.statements) if contains(h.snippet, h.path, s)),
                None,
            )
            newest_first.append(int(first is target))
            flagged.append(int(any(h.parts.superseded for h in out.results)))
    res: dict[str, object] = {cat: sum(v) / len(v) for cat, v in stats.items()}
    res["all"] = sum(sum(v) for v in stats.values()) / sum(len(v) for v in stats.values())
    res["newest_first"] = sum(newest_first) / len(newest_first) if newest_first else float("nan")
    res["superseded_flagged"] = sum(flagged) / len(flagged) if flagged else float("nan")
    res["counts"] = {cat: len(v) for cat, v in stats.items()}
    return res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default="keyword,hybrid", help="keyword,hybrid (default both)")
    parser.add_argument("--decays", default="off,multiplicative,supersede")
    parser.add_argument("--unique", type=int, default=72, help="unique facts (default 72)")
    parser.add_argument("--updated", type=int, default=36, help="updated facts (default 36)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--bare",
        action="store_true",
        help="fact sections hold only the fact (default: fact + a context sentence)",
    )
    parser.add_argument("--threads", type=int, default=0, help="embedding threads (0: all cores)")
    parser.add_argument("--workdir", default="/tmp/mnemo-bench/longhorizon")
    parser.add_argument("--name", default="longhorizon")
    args = parser.parse_args(argv)

    from mnemo.services import build_services

    files, questions = build(args.seed, args.unique, args.updated, bare=args.bare)
    m = machine()
    rows = []
    for mode in [x.strip() for x in args.modes.split(",") if x.strip()]:
        variant = "bare" if args.bare else "ctx"
        ws = Path(args.workdir) / f"{mode}-{args.seed}-{args.unique}-{args.updated}-{variant}"
        if ws.exists():
            shutil.rmtree(ws)
        for rel, text in files.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text, encoding="utf-8")
        (ws / "mnemo.toml").write_text(f"[embedding]\nthreads = {args.threads}\n", encoding="utf-8")
        services = build_services(ws, provider="none" if mode == "keyword" else "local")
        cache = None
        if mode == "hybrid":
            cache = CachingEmbedder(
                services.memory.embedder, OUT / "cache" / f"longhorizon-{args.seed}-minilm.npz"
            )
            install_embedder(services, cache)
        try:
            t = time.perf_counter()
            report = services.memory.sync()
            print(
                f"{mode}: indexed {report.files_seen} files in {time.perf_counter() - t:.1f}s",
                file=sys.stderr,
            )
            for decay in [x.strip() for x in args.decays.split(",") if x.strip()]:
                r = evaluate(services.memory, questions, decay)
                r.update(mode=mode, decay=decay, chunks=services.memory.status().chunks)
                rows.append(r)
                print(f"  {decay}: {r}", file=sys.stderr)
        finally:
            services.close()
    counts = rows[0]["counts"] if rows else {}
    table = md_table(
        [
            "mode",
            "decay",
            f"unique, >180 d old ({counts.get('unique-old', 0)})",
            f"unique, last 180 d ({counts.get('unique-recent', 0)})",
            f"updated → newest ({counts.get('updated', 0)})",
            "updated: newest ranked first",
            "updated: a result flagged superseded",
            f"all ({len(questions)})",
        ],
        [
            [
                r["mode"],
                r["decay"],
                r.get("unique-old", float("nan")),
                r.get("unique-recent", float("nan")),
                r.get("updated", float("nan")),
                r["newest_first"],
                r["superseded_flagged"],
                r["all"],
            ]
            for r in rows
        ],
    )
    md = (
        f"### Long-horizon recall (Hit@5; {DAYS} daily notes {START} .. {TODAY}, today = {TODAY}; fact sections: "
        f"{'the fact alone' if args.bare else 'the fact and one context sentence'})\n\n{table}\n\n"
        f"{machine_line(m)}\nCommand: `{command_line()}`\n"
    )
    write_outputs(
        args.name,
        {
            "machine": m,
            "command": command_line(),
            "results": rows,
            "questions": [
                {"q": q.text, "category": q.category, "days": [s.day.isoformat() for s in q.statements]}
                for q in questions
            ],
        },
        md,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

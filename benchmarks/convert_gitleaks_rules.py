"""Convert gitleaks' public rule set (config/gitleaks.toml, MIT) into mnemo's JSON rule data.

Run once when refreshing the rules; the output is committed at
server/mnemo/secrets/data/gitleaks_rules.json (with LICENSE-gitleaks beside it):

    python benchmarks/convert_gitleaks_rules.py path/to/gitleaks.toml \
        --commit <gitleaks commit> -o server/mnemo/secrets/data/gitleaks_rules.json

What the conversion does (and records in the output's "notes"/"dropped"):
- Go RE2 syntax -> Python `regex` (compiled with regex.V1 so that a mid-pattern `(?i)` is scoped
  as in Go): `\\z` becomes `\\Z`.
- The leading `[\\w.-]{0,50}?` of gitleaks' keyword-context rules is removed and recorded as
  `extend_left: 50`; the scanner re-extends the match start backwards instead, which keeps the
  same match text for `regexTarget = "match"` allowlists without the quadratic lazy prefix.
- Rules restricted to file paths (`path = ...`: .php, .tf, .yaml, nuget.config, .p12) are dropped:
  mnemo scans Markdown memory only. Path-only allowlists are dropped for the same reason.
- Rules that fail to compile with `regex` are dropped with the error.
- `anchor: true` (ANCHORED): the rule is only tried at its keywords' positions.
- Keyword-less rules get the literal their regex requires as keywords (DERIVED_KEYWORDS).
- `priority` orders overlapping findings: 3 = distinctive token format, 2 = service keyword +
  value, 0 = generic-api-key.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import regex

PREFIX = r"[\w.-]{0,50}?"
KEYWORD_CONTEXT = r"(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)"
# gitleaks rules without keywords run on every text; give them the literal their regex requires.
DERIVED_KEYWORDS = {"database-password": ["passw", "pwd"]}
# Rules whose regex (prefix removed) starts exactly at one of their keywords: the scanner tries them
# only at keyword positions. Checked by hand: generic-api-key's key alternation == its keywords.
ANCHORED = {"generic-api-key"}


# gitleaks ends most keys at a quote, a space or ";"; a key in a URL's query (``?key=...&x=1``), a Markdown
# link (``(https://...?key=...)``) or a table cell ends at these too, else it is missed.
TERMINATOR = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
TERMINATOR_IN_LINKS = r"""(?:[\x60'"\s;&),\]}>|#]|\\[nr]|$)"""


def go_to_python(pattern: str) -> tuple[str, int]:
    """Return the Python `regex` pattern and how far the match start must be re-extended left."""
    extend = 0
    if pattern.startswith("(?i)" + PREFIX):
        pattern = "(?i)" + pattern[len("(?i)" + PREFIX) :]
        extend = 50
    elif pattern.startswith(PREFIX + "(?i:" + PREFIX):
        pattern = "(?i:" + pattern[len(PREFIX + "(?i:" + PREFIX) :]
        extend = 50
    return pattern.replace(r"\z", r"\Z").replace(TERMINATOR, TERMINATOR_IN_LINKS), extend


def convert_allowlist(al: dict[str, Any]) -> dict[str, Any] | None:
    if al.get("paths") and (al.get("condition", "OR").upper() == "AND" or not al.get("regexes")):
        return None  # path-based: never applies to a memory file
    out: dict[str, Any] = {"target": al.get("regexTarget", "secret")}
    if al.get("regexes"):
        out["regexes"] = [go_to_python(r)[0] for r in al["regexes"]]
    if al.get("stopwords"):
        out["stopwords"] = [s.lower() for s in al["stopwords"]]
    return out if ("regexes" in out or "stopwords" in out) else None


def convert(config: dict[str, Any], commit: str) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    dropped: list[dict[str, str]] = []
    for rule in config.get("rules", []):
        rid = rule["id"]
        if "regex" not in rule:
            dropped.append({"id": rid, "reason": "path-only rule (no regex)"})
            continue
        if "path" in rule:
            dropped.append({"id": rid, "reason": f"restricted to paths {rule['path']!r}, not Markdown"})
            continue
        pattern, extend = go_to_python(rule["regex"])
        try:
            regex.compile(pattern, regex.V1)
        except regex.error as exc:
            dropped.append({"id": rid, "reason": f"does not compile with regex: {exc}"})
            continue
        if rid.startswith("generic"):
            priority = 0
        elif KEYWORD_CONTEXT in pattern:
            priority = 2
        else:
            priority = 3
        out: dict[str, Any] = {
            "id": rid,
            "description": rule.get("description", rid),
            "regex": pattern,
            "keywords": [k.lower() for k in rule.get("keywords", DERIVED_KEYWORDS.get(rid, []))],
            "entropy": float(rule.get("entropy", 0.0)),
            "secret_group": int(rule.get("secretGroup", 0)),
            "priority": priority,
        }
        if extend:
            out["extend_left"] = extend
        if rid in ANCHORED:
            # keyword (<= 10 chars) + [ \t\w.-]{0,20} + [\s'"]{0,3} + separator fits in 40 chars
            out.update(anchor=True, precheck=r"[=>:|?,]", precheck_window=40)
        allowlists = [a for a in (convert_allowlist(al) for al in rule.get("allowlists", [])) if a]
        if allowlists:
            out["allowlists"] = allowlists
        rules.append(out)
    glob = config.get("allowlist", {})
    return {
        "source": "https://github.com/gitleaks/gitleaks/blob/master/config/gitleaks.toml",
        "source_commit": commit,
        "license": "MIT, Copyright (c) 2019 Zachary Rice; see LICENSE-gitleaks",
        "notes": (__doc__ or "").split("What the conversion does", 1)[-1].strip(),
        "global_allowlist": {
            "regexes": [go_to_python(r)[0] for r in glob.get("regexes", [])],
            "stopwords": [s.lower() for s in glob.get("stopwords", [])],
        },
        "dropped": dropped,
        "rules": rules,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("toml", type=Path, help="gitleaks config/gitleaks.toml")
    parser.add_argument("--commit", default="unknown", help="gitleaks commit the file was taken from")
    parser.add_argument("-o", "--output", type=Path, default=None, help="output JSON (default: stdout)")
    args = parser.parse_args(argv)
    data = convert(tomllib.loads(args.toml.read_text(encoding="utf-8")), args.commit)
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    print(f"{len(data['rules'])} rules kept, {len(data['dropped'])} dropped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Code given on the command line: interpreters (``python -c``, ``perl -e`` ...), sed scripts, awk programs.

Inline interpreter code is confirmed at least, and denied when it spawns processes or opens sockets, or
when a path literal in it lies outside the workspace (or is a protected file) and the code writes or
deletes. sed's ``e`` command and ``s///e`` run commands (confirm; the command text is checked too), ``w``
and ``W`` write files (checked like a redirection). awk's ``system()``, pipes and ``print >`` likewise.
"""

from __future__ import annotations

import re

from mnemo.policy.shell import Segment, is_safe_target, resolve_path
from mnemo.policy.targets import check_write, classify
from mnemo.policy.verdict import Context, Decision, Verdict, confirm, deny

SHELLS = re.compile(r"^(sh|bash|zsh|dash|ksh|mksh|fish|csh|tcsh|busybox)$")
CODE_LETTERS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(python[0-9.]*|pypy[0-9.]*)$"), "c"),
    (re.compile(r"^(perl[0-9.]*|ruby[0-9.]*|lua[0-9.]*|luajit|tclsh.*)$"), "eE"),
    (re.compile(r"^(node|nodejs|deno|bun)$"), "ep"),
    (re.compile(r"^php[0-9.]*$"), "r"),
    (re.compile(r"^(Rscript|julia|osascript)$"), "e"),
]
RISKY_CODE = re.compile(
    r"socket|pty|subprocess|os\.(system|popen|exec|spawn|fork|remove|unlink)|child_process|rmtree"
    r"|/dev/tcp|\bsystem\s*\(|\bexec[lv]?p?e?\s*\(|`|\bqx\b|Popen|spawnSync|execSync|IO\.popen|%x\{"
)
WRITE_CODE = re.compile(
    r"open\s*\([^)]*['\"][^'\"]*['\"]\s*,\s*['\"]?[wax+>]|\.write|unlink|remove|rmtree|rmdir|rename|"
    r"replace\s*\(|chmod|chown|symlink|truncate|mkdir|makedirs|shutil|copy|move|writeFile|appendFile|"
    r"rmSync|File\.(write|delete|open)|FileUtils|open\s*\(\s*\w+\s*,\s*['\"][>+]|utime|touch",
    re.IGNORECASE,
)
STRING_RE = re.compile(r"'((?:\\.|[^'\\])*)'|\"((?:\\.|[^\"\\])*)\"")
PROTECTED_HINT = re.compile(r"(^|/)(MEMORY\.md|mnemo\.toml|\.git|\.mnemo|memory)(/|$)")


def _code_letters(name: str) -> str:
    return next((letters for pattern, letters in CODE_LETTERS if pattern.match(name)), "")


def inline_code(seg: Segment) -> list[str]:
    """The code strings passed with ``-c``/``-e``/``--eval`` ... to an interpreter (not a shell)."""
    letters = _code_letters(seg.name)
    args = seg.argv[1:]
    found: list[str] = []
    for i, a in enumerate(args):
        if a in ("--eval", "--print", "--command") and i + 1 < len(args):
            found.append(args[i + 1])
        elif a.startswith(("--eval=", "--print=")):
            found.append(a.split("=", 1)[1])
        elif letters and re.match(r"^-[A-Za-z]+", a) and not a.startswith("--"):
            hit = next((k for k, ch in enumerate(a[1:], 1) if ch in letters), None)
            if hit is not None:
                rest = a[hit + 1 :]
                found.append(rest if rest else (args[i + 1] if i + 1 < len(args) else ""))
        if found and not seg.name.startswith(("perl", "ruby")):
            break
    return found


def check_interpreter(seg: Segment, ctx: Context) -> list[Decision]:
    """Inline code: confirm at least; deny when it spawns processes, or writes outside or to protected files."""
    if not _code_letters(seg.name):
        return []
    codes = inline_code(seg)
    if not codes:
        stdin = any(r.op in ("<", "<<", "<<<") for r in seg.redirects)
        if stdin and all(p == "-" for p in _script(seg)):
            return [confirm("inline-code", f"{seg.name} reads code from standard input")]
        return []
    hits = [confirm("inline-code", f"{seg.name} runs inline code: cannot check what it does")]
    for code in codes:
        if RISKY_CODE.search(code):
            hits.append(deny("inline-code", f"{seg.name} inline code with process or socket access"))
        writes = bool(WRITE_CODE.search(code))
        for literal in (a or b for a, b in STRING_RE.findall(code)):
            hits.extend(_literal(seg.name, literal, writes, ctx))
    if seg.name.startswith(("perl", "ruby")) and any(re.match(r"^-[a-zA-Z]*i", a) for a in seg.argv[1:]):
        hits += [h for f in _script(seg)[1:] for h in check_write(f, "modify", ctx)]
    return hits


def _script(seg: Segment) -> list[str]:
    return [a for a in seg.argv[1:] if not a.startswith("-") or a == "-"] or ["-"]


def _literal(name: str, literal: str, writes: bool, ctx: Context) -> list[Decision]:
    if not (literal.startswith(("/", "~", "../")) or PROTECTED_HINT.search(literal)):
        return []
    path = resolve_path(literal, ctx.base)
    kind = classify(path, ctx.ws)
    if kind == "control" or (writes and kind in ("memory", "workspace")):
        return [deny("inline-code", f"{name} inline code touches the protected path {literal}")]
    if writes and not is_safe_target(literal, ctx.ws, ctx.base):
        return [
            deny("inline-code", f"{name} inline code writes or deletes outside the workspace ({literal})")
        ]
    return []


# -- sed ----------------------------------------------------------------------------------------


def sed_flag(arg: str, letter: str) -> bool:
    """``arg`` is sed's short flag ``letter``, alone or after flags that take no value (``-nf``, ``-Ei``)."""
    return bool(re.match(rf"^-[nrEsuz]*{letter}", arg))


def sed_script_file(arg: str) -> bool:
    """``arg`` names a sed script file (``-f FILE``, ``-nfFILE``, ``--file=FILE``)."""
    return arg.startswith("--file") or sed_flag(arg, "f")


def _sed_scripts(args: list[str]) -> list[str] | None:
    scripts: list[str] = []
    explicit = False
    positional: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--expression"):
            explicit = True
            scripts.append(a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else ""))
            i += 0 if "=" in a else 1
        elif sed_script_file(a):
            explicit = True  # a script file: like running a script, not inline code
            i += 0 if "=" in a or not a.endswith("f") else 1
        elif sed_flag(a, "e"):
            explicit = True
            rest = a[a.index("e") + 1 :]
            scripts.append(rest or (args[i + 1] if i + 1 < len(args) else ""))
            i += 0 if rest else 1
        elif a in ("-l", "--line-length"):
            i += 1
        elif not a.startswith("-") or a == "-":
            positional.append(a)
        i += 1
    if not explicit:
        scripts = positional[:1]
    return scripts


def sed_commands(script: str) -> list[tuple[str, str]] | None:
    """``(command, argument)`` for each e/w/W/r/R command and s///e or s///w flag; None if unreadable."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(script)

    def to_eol(k: int) -> tuple[str, int]:
        end = script.find("\n", k)
        end = n if end < 0 else end
        return script[k:end].strip(), end

    def skip_delimited(k: int, delim: str) -> int:
        while k < n and script[k] != delim:
            k += 2 if script[k] == "\\" else 1
        return k + 1

    while i < n:
        c = script[i]
        if c in " \t\n;{}!,+~0123456789$":
            i += 1
        elif c == "/":
            i = skip_delimited(i + 1, "/")
        elif c == "\\" and i + 1 < n:
            i = skip_delimited(i + 2, script[i + 1])
        elif c in "IM" and i > 0 and script[i - 1] == "/":
            i += 1
        elif c == "#" or c == ":":
            i = to_eol(i)[1]
        elif c in "sy":
            if i + 1 >= n:
                return None
            i = skip_delimited(skip_delimited(i + 2, script[i + 1]), script[i + 1])
            while c == "s" and i < n and script[i] in "gpiImMe0123456789w":
                if script[i] == "e":
                    out.append(("e", ""))
                if script[i] == "w":
                    target, i = to_eol(i + 1)
                    out.append(("w", target))
                    break
                i += 1
        elif c in "ewWrR":
            arg, i = to_eol(i + 1)
            out.append((c, arg))
        elif c in "aic":
            arg, i = to_eol(i + 1)
            while arg.endswith("\\") and i < n:
                arg, i = to_eol(i + 1)
        elif c in "btTvqQlL":
            i += 1
            while i < n and script[i] not in ";\n}":
                i += 1
        elif c in "=dDgGhHnNpPxzF":
            i += 1
        else:
            return None
    return out


def check_sed(seg: Segment, ctx: Context) -> list[Decision]:
    if "--sandbox" in seg.argv:
        return []
    hits: list[Decision] = []
    if any(sed_script_file(a) for a in seg.argv[1:]):
        # A script file is not read here, and one the line itself wrote (`s/.../1e CMD/w p.sed`, then
        # `sed -f p.sed`) ran a command: an allowlisted sed with a script file asks first.
        hits.append(confirm("sed-script-file", "sed runs a script file, which is not checked"))
    for script in _sed_scripts(seg.argv[1:]) or []:
        commands = sed_commands(script)
        if commands is None:
            hits.append(confirm("sed-script", f"sed script {script[:40]!r} is not understood"))
            continue
        for command, arg in commands:
            if command == "e":
                hits.append(confirm("sed-exec", "sed e runs a command"))
                if arg:
                    hits.append(ctx.recurse(arg))
            elif command in "wW" and arg not in ("/dev/stdout", "/dev/stderr"):
                hits.extend(check_write(arg, "truncate", ctx))
            elif command in "rR" and not is_safe_target(arg, ctx.ws, ctx.base):
                hits.append(confirm("read-outside", f"sed reads {arg}, outside the workspace"))
    return hits


# -- awk ----------------------------------------------------------------------------------------

AWK_PIPE = re.compile(r"(?<!\|)\|(?!\|)|\bsystem\s*\(|@load|\|&")
AWK_PRINT_TO = re.compile(r"\bprintf?\b[^;}\n]*?(>>|>)\s*(\"([^\"]*)\"|[A-Za-z_$][\w$]*)")


def check_awk(seg: Segment, ctx: Context) -> list[Decision]:
    args = seg.argv[1:]
    program = ""
    hits: list[Decision] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-f", "--file", "-E", "--exec") or a.startswith("--file="):
            # A program file is not read here (the line may have written it: `system()` inside).
            return [confirm("awk-script-file", "awk runs a program file, which is not checked")]
        if a in ("-l", "--load", "-i", "--include") and args[i + 1 : i + 2] != ["inplace"]:
            return [confirm("awk-exec", f"awk {a} loads code")]
        if a in ("-F", "-v", "--assign", "--field-separator", "-i", "--include"):
            i += 2
            continue
        if a in ("-e", "--source") or not a.startswith("-"):
            program = args[i + 1] if a.startswith("-") and i + 1 < len(args) else a
            break
        i += 1
    if AWK_PIPE.search(program):
        hits.append(confirm("awk-exec", "awk runs a command (system(), a pipe or @load)"))
        for a, b in STRING_RE.findall(program):
            decision = ctx.recurse(a or b)
            if decision.verdict is Verdict.DENY:
                hits.append(decision)
    for op, _, literal in AWK_PRINT_TO.findall(program):
        if literal:
            hits.extend(check_write(literal, "append" if op == ">>" else "truncate", ctx))
        else:
            hits.append(confirm("variable-target", "awk prints to a file named by an expression"))
    if "inplace" in args:
        files = [a for a in args[i + 1 :] if not a.startswith("-")]
        hits += [h for f in files for h in check_write(f, "modify", ctx)]
    return hits

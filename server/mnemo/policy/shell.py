"""Parse an ``exec`` command line into segments that the policy checks one by one.

The parser is deliberately conservative: it never runs a shell, it splits the line with :mod:`shlex`
(``punctuation_chars``) over pipes, ``&&``, ``||``, ``;``, ``&``, parentheses and newlines, and it refuses
what it cannot see through:

* command substitution ``$(...)``, backticks, process substitution ``<(...)`` / ``>(...)``;
* ``eval`` and ``env -S`` (a string re-split into a command), shell function definitions (fork bombs);
* assignments that change how commands resolve or run (``PATH=``, ``LD_PRELOAD=``, ``BASH_ENV=`` ...);
* redirections (``>``, ``>>``, ``2>``, ``&>``, ``<>``) to paths outside the workspace (``/dev/null``, the
  standard streams and the sandbox's private ``/tmp`` excepted);
* a command name that is itself a variable (``$X -rf /``).

Variables assigned earlier on the same line are substituted in the later segments' arguments and
redirection targets (:class:`Variables`), so ``X=/etc/x; : > $X`` is refused like ``: > /etc/x``.

A quoted word that consists only of operator characters (``echo '|'``) is read as an operator: this
over-splits, which can only make the verdict stricter. Here-document bodies are parsed as commands for the
same reason. The first word of each segment is resolved with :func:`shutil.which`, through the wrappers
``env``, ``command``, ``nice``, ``timeout``, ``xargs``, ``nohup``, ``stdbuf``, ``ionice``, ``setsid`` and
the keywords ``exec``/``time``/``!``/``{``/``if``/``then``/``do`` ...
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

SEPARATORS = frozenset({"|", "|&", "||", "&&", ";", ";;", "&", "\n", "(", ")"})
REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<", "<<", "<<<", ">&", "<&", "<>"})
OUTPUT_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"})
KEYWORDS |= {"time", "exec", "builtin"}
_OPERATOR_RE = re.compile(r"&>>|&>|>>|>\||>&|<&|<<<|<<|<>|\|\||&&|\|&|;;|[;|&<>()\n]")
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_FUNCDEF_RE = re.compile(r"(^|[\s;&|(){}])(function\s+)?[^\s;&|()<>'\"]*\s*\(\s*\)\s*\{")
HIJACK_VARS = frozenset(
    {"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "IFS", "PROMPT_COMMAND"}
    | {"PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT", "GIT_SSH_COMMAND", "SHELLOPTS"}
    | {
        "CDPATH",
        "BASHOPTS",
        "PS4",
        "GLOBIGNORE",
        "PYTHONHOME",
        "PERL5LIB",
        "RUBYLIB",
        "NODE_PATH",
        "LESSOPEN",
    }
    | {"LESSCLOSE", "MANPAGER", "BROWSER", "SSH_ASKPASS", "SUDO_ASKPASS", "PYTHONINSPECT"}
)
HIJACK_PREFIXES = ("LD_", "GIT_", "BASH_FUNC_", "DYLD_")
SAFE_GIT_VARS = frozenset(
    {"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}
    | {"GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS", "GIT_FLUSH", "GIT_MERGE_AUTOEDIT"}
)
VAR_RE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
SAFE_TARGETS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/tmp")
# wrapper -> (options that take a value, positional words to skip before the command)
WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "env": (frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "command": (frozenset(), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "xargs": (frozenset({"-I", "-n", "-P", "-L", "-s", "-d", "-E", "-a", "--delimiter", "--arg-file"}), 0),
    "nohup": (frozenset(), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p"}), 0),
    "setsid": (frozenset(), 0),
}


@dataclass
class Redirect:
    op: str
    target: str


@dataclass
class Segment:
    """One simple command of a command line."""

    words: list[str]
    """The words as written, redirections removed."""
    argv: list[str] = field(default_factory=list)
    """The command and its arguments once assignments, keywords and wrappers are stripped."""
    assignments: list[str] = field(default_factory=list)
    wrappers: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    piped: bool = False
    """True when the segment reads its standard input from a pipe."""
    binary: str | None = None
    """The resolved path of ``argv[0]`` (``shutil.which``), None when it does not resolve."""

    @property
    def name(self) -> str:
        return os.path.basename(self.argv[0]) if self.argv else ""

    @property
    def text(self) -> str:
        return shlex.join(self.argv)


@dataclass
class ParsedCommand:
    segments: list[Segment]
    refusals: list[tuple[str, str]]
    """(rule, reason) for every construct the parser refuses; any refusal means deny."""


def scan_raw(command: str) -> tuple[str, list[tuple[str, str]]]:
    """Strip comments and line continuations; report substitutions outside single quotes."""
    out: list[str] = []
    found: list[tuple[str, str]] = []
    quote = ""
    i = 0
    while i < len(command):
        c = command[i]
        nxt = command[i + 1] if i + 1 < len(command) else ""
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\" and nxt:
            if nxt != "\n":
                out.append(c + nxt)
            i += 2
            continue
        elif c in "'\"" and (not quote or quote == c):
            quote = "" if quote else c
        elif c == "`":
            found.append(("shell:substitution", "command substitution with backticks is refused"))
        elif c == "$" and nxt == "(":
            found.append(("shell:substitution", "command substitution $(...) is refused"))
        elif c in "<>" and nxt == "(" and not quote:
            found.append(("shell:substitution", f"process substitution {c}(...) is refused"))
        elif c == "#" and not quote and (not out or out[-1][-1] in " \t\n;&|()"):
            while i < len(command) and command[i] != "\n":
                i += 1
            continue
        out.append(c)
        i += 1
    if quote:
        found.append(("shell:syntax", f"unterminated {quote} quote"))
    return "".join(out), found


def tokenize(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    tokens: list[str] = []
    for token in lexer:
        if token and all(ch in "();<>|&\n" for ch in token):
            tokens.extend(_OPERATOR_RE.findall(token))
        else:
            tokens.append(token)
    return tokens


def expand_home(arg: str) -> str:
    home = str(Path.home())
    for var in ("${HOME}", "$HOME"):
        if arg == var or arg.startswith(var + "/"):
            return home + arg[len(var) :]
    if arg == "~" or arg.startswith("~/"):
        return home + arg[1:]
    return os.path.expanduser(arg) if arg.startswith("~") else arg


def resolve_path(arg: str, workspace: Path) -> Path:
    """Where ``arg`` points: ``~``/``$HOME`` expanded, relative to the workspace, glob part cut, symlinks
    resolved."""
    text = expand_home(arg)
    cut = re.search(r"[*?\[{$]", text)
    if cut:
        text = text[: cut.start()]
        text = text if text.endswith("/") or not text else os.path.dirname(text) or "."
    base = Path(text) if os.path.isabs(text) else workspace / text
    return Path(os.path.realpath(base))


def is_inside(path: Path, workspace: Path) -> bool:
    ws = Path(os.path.realpath(workspace))
    return path == ws or ws in path.parents


def is_hijack(assignment: str) -> bool:
    """True when ``NAME=value`` (or a bare ``NAME``) changes how commands are found or run: ``PATH``,
    ``IFS``, ``CDPATH``, ``LD_*``, ``BASH_ENV``, ``GIT_*`` (but author/committer names, and a ``cat``
    pager) ..."""
    name, _, value = assignment.partition("=")
    name = re.split(r"[+\[]", name, maxsplit=1)[0]
    if name in HIJACK_VARS:
        return True
    if name in ("GIT_PAGER", "PAGER"):
        return value not in ("", "cat")
    return name.startswith(HIJACK_PREFIXES) and name not in SAFE_GIT_VARS


def is_safe_target(arg: str, workspace: Path, base: Path | None = None) -> bool:
    """True for a path a command may write to: inside the workspace, ``/dev/null``, private ``/tmp``.
    Relative paths resolve against ``base`` (default: the workspace)."""
    path = resolve_path(arg, base or workspace)
    if is_inside(path, workspace):
        return True
    if is_inside(Path(os.path.realpath(workspace)), path):
        return False  # an ancestor of the workspace
    return any(
        str(path) == safe or str(path).startswith(safe + "/") for safe in SAFE_TARGETS if safe != "/tmp"
    ) or (str(path).startswith("/tmp/"))


def _unwrap(seg: Segment, path: str | None) -> list[tuple[str, str]]:
    refusals: list[tuple[str, str]] = []
    argv = list(seg.words)
    while argv:
        head = argv[0]
        if _ASSIGN_RE.match(head):
            seg.assignments.append(argv.pop(0))
        elif head in KEYWORDS:
            argv.pop(0)
        elif os.path.basename(head) in WRAPPERS:
            name = os.path.basename(head)
            takes_value, positional = WRAPPERS[name]
            seg.wrappers.append(name)
            argv.pop(0)
            while argv and argv[0].startswith("-") and argv[0] != "-":
                opt = argv.pop(0)
                if opt == "--":
                    break
                if name == "env" and re.match(r"^(-[a-zA-Z0-9]*S|--split-string)", opt):
                    refusals.append(("shell:eval", "env -S re-splits a string into a command"))
                if opt in takes_value and argv:
                    argv.pop(0)
            while name == "env" and argv and _ASSIGN_RE.match(argv[0]):
                seg.assignments.append(argv.pop(0))
            del argv[:positional]
        else:
            break
    if not argv and seg.wrappers:
        argv = [seg.wrappers[-1]]  # a bare wrapper (``env``) runs itself
    seg.argv = argv
    for assignment in seg.assignments:
        if is_hijack(assignment):
            var = re.split(r"[+\[=]", assignment, maxsplit=1)[0]
            refusals.append(("shell:env-hijack", f"setting {var} changes what runs and is refused"))
    if argv:
        if "$" in argv[0] or "`" in argv[0]:
            refusals.append(("shell:dynamic-command", f"command name {argv[0]!r} comes from a variable"))
        elif os.path.basename(argv[0]) == "eval":
            refusals.append(("shell:eval", "eval runs a string as a command and is refused"))
        else:
            seg.binary = shutil.which(argv[0], path=path)
    return refusals


class Variables:
    """Shell variables assigned earlier on the same command line (``X=/etc/x; : > $X``).

    Only values without blanks or glob characters are substituted (word splitting would change them);
    a variable assigned twice, read (``read``, ``mapfile``, ``for``) or unset becomes unknown and stays
    ``$X``, which the rules treat as "cannot check" (confirm). The command name is never substituted:
    ``$X`` as a command stays refused.
    """

    def __init__(self) -> None:
        self.known: dict[str, str] = {}
        self.unknown: set[str] = set()

    def _set(self, name: str, value: str | None) -> None:
        if name in self.known or name in self.unknown or value is None or re.search(r"[\s*?\[$`]", value):
            self.known.pop(name, None)
            self.unknown.add(name)
        else:
            self.known[name] = value

    def _expand(self, word: str) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            return self.known.get(name, match.group(0))

        return VAR_RE.sub(one, word) if "$" in word else word

    def substitute(self, seg: Segment) -> None:
        if not self.known:
            return
        seg.words = [self._expand(w) for w in seg.words]
        seg.argv = seg.argv[:1] + [self._expand(w) for w in seg.argv[1:]]
        for red in seg.redirects:
            red.target = self._expand(red.target)

    def record(self, seg: Segment) -> None:
        name = seg.name
        pairs: list[str] = []
        if not seg.argv:
            pairs = seg.assignments
        elif name in ("export", "declare", "typeset", "local", "readonly"):
            pairs = [a for a in seg.argv[1:] if _ASSIGN_RE.match(a)]
        elif name in ("read", "mapfile", "readarray", "unset", "for", "select", "getopts", "printf"):
            for word in seg.argv[1:]:
                if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word):
                    self._set(word, None)
            self._set("REPLY", None)
            self._set("MAPFILE", None)
        for pair in pairs:
            var, _, value = pair.partition("=")
            self._set(
                re.split(r"[+\[]", var, maxsplit=1)[0], value if "+" not in var and "[" not in var else None
            )


def parse_command(command: str, workspace: Path, *, path: str | None = None) -> ParsedCommand:
    """Split ``command`` into :class:`Segment` objects and collect what the parser refuses."""
    cleaned, refusals = scan_raw(command)
    if _FUNCDEF_RE.search(cleaned):
        refusals.append(("shell:function", "shell function definitions are refused (fork-bomb shape)"))
    try:
        tokens = tokenize(cleaned)
    except ValueError as exc:
        return ParsedCommand([], [*refusals, ("shell:syntax", f"cannot parse the command: {exc}")])
    segments: list[Segment] = []
    current = Segment(words=[])
    variables = Variables()
    piped = False
    i = 0
    while i <= len(tokens):
        token = tokens[i] if i < len(tokens) else "\n"
        if token in SEPARATORS:
            if current.words or current.redirects:
                current.piped = piped
                refusals.extend(_unwrap(current, path))
                variables.substitute(current)
                variables.record(current)
                segments.append(current)
            piped = token in ("|", "|&")
            current = Segment(words=[])
        elif token in REDIRECTS:
            if current.words and current.words[-1].isdigit():
                current.words.pop()
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if target in SEPARATORS or target in REDIRECTS or not target:
                refusals.append(("shell:syntax", f"redirection {token} without a target"))
            current.redirects.append(Redirect(token, target))
            i += 1
        else:
            current.words.append(token)
        i += 1
    for seg in segments:
        for red in seg.redirects:
            if red.op in (">&", "<&") and (red.target.isdigit() or red.target == "-"):
                continue
            if red.op in OUTPUT_REDIRECTS and not is_safe_target(red.target, workspace):
                refusals.append(
                    ("shell:redirect-outside", f"redirection {red.op} {red.target} leaves the workspace")
                )
    return ParsedCommand(segments, refusals)

"""Command-line parsing: segments, refusals, redirections, wrappers."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemo.policy import Verdict, check, parse_command


def test_segments_over_operators(tmp_path: Path) -> None:
    parsed = parse_command(
        'ls -la && echo "a;b|c" | grep x > out.txt 2>&1; pwd\nwhoami || true & date', tmp_path
    )
    assert parsed.refusals == []
    assert [s.argv for s in parsed.segments] == [
        ["ls", "-la"],
        ["echo", "a;b|c"],
        ["grep", "x"],
        ["pwd"],
        ["whoami"],
        ["true"],
        ["date"],
    ]
    grep = parsed.segments[2]
    assert grep.piped and [(r.op, r.target) for r in grep.redirects] == [(">", "out.txt"), (">&", "1")]


def test_wrappers_resolve_to_the_real_binary(tmp_path: Path) -> None:
    seg = parse_command(
        "env -u X LANG=C nice -n 5 timeout -s KILL 10 xargs -n 1 command ls -l", tmp_path
    ).segments[0]
    assert seg.argv == ["ls", "-l"] and seg.wrappers == ["env", "nice", "timeout", "xargs", "command"]
    assert seg.binary is not None and seg.binary.endswith("/ls")
    assert seg.assignments == ["LANG=C"]


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("echo $(id)", "shell:substitution"),
        ('echo "$(id)"', "shell:substitution"),
        ("echo `id`", "shell:substitution"),
        ("diff <(ls) <(ls -a)", "shell:substitution"),
        ("tee >(cat)", "shell:substitution"),
        ("eval ls", "shell:eval"),
        ("env -S 'ls -l'", "shell:eval"),
        ("f() { f | f & }; f", "shell:function"),
        ("echo x > /etc/motd", "shell:redirect-outside"),
        ("echo x >> /root/up.txt", "shell:redirect-outside"),
        ("echo x 2> ~/err.log", "shell:redirect-outside"),
        ("echo x &> /var/tmp/all.log", "shell:redirect-outside"),
        ("PATH=/tmp ls", "shell:env-hijack"),
        ("$CMD -rf /", "shell:dynamic-command"),
        ("echo 'unterminated", "shell:syntax"),
        ("echo >", "shell:syntax"),
    ],
)
def test_refused_constructs(tmp_path: Path, command: str, rule: str) -> None:
    decision = check("exec", {"command": command}, tmp_path)
    assert (decision.verdict, decision.rule) == (Verdict.DENY, rule)
    assert decision.reason


@pytest.mark.parametrize(
    "command",
    [
        "echo '$(not run)' '`neither`'",
        "echo x > out.txt 2> err.txt",
        "echo x > /dev/null 2>&1",
        "sort < in.txt > sorted.txt",
        "echo x > /tmp/scratch.txt",
        "grep -c x notes.md # count $(this) is a comment",
    ],
)
def test_harmless_constructs_are_not_denied(tmp_path: Path, command: str) -> None:
    assert check("exec", {"command": command}, tmp_path).verdict is not Verdict.DENY


def test_comment_does_not_hide_the_next_line(tmp_path: Path) -> None:
    assert check("exec", {"command": "ls # fine\nrm -rf ~"}, tmp_path).verdict is Verdict.DENY
    assert check("exec", {"command": "ls \\\n -l"}, tmp_path).verdict is Verdict.CONFIRM


def test_nested_shell_strings_are_checked(tmp_path: Path) -> None:
    assert check("exec", {"command": "bash -c \"sh -c 'rm -rf /'\""}, tmp_path).verdict is Verdict.DENY
    assert check("exec", {"command": "find . -exec sudo id ;"}, tmp_path).verdict is Verdict.DENY
    assert check("exec", {"command": "bash -lc 'ls'"}, tmp_path).verdict is Verdict.CONFIRM


def test_cd_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert check("exec", {"command": "cd / && ls"}, tmp_path).verdict is Verdict.DENY
    assert check("exec", {"command": "cd sub && ls"}, tmp_path).verdict is Verdict.CONFIRM


def test_variables_of_the_line_are_substituted_where_they_are_known(tmp_path: Path) -> None:
    parsed = parse_command("X=/etc/motd; Y='a b'; Z=1; Z=2; echo $X ${X} $Y $Z > $X", tmp_path)
    echo = parsed.segments[-1]
    assert echo.argv == ["echo", "/etc/motd", "/etc/motd", "$Y", "$Z"]  # blanks and reassignment: unknown
    assert echo.redirects[0].target == "/etc/motd"
    assert ("shell:redirect-outside", "redirection > /etc/motd leaves the workspace") in parsed.refusals
    read = parse_command("X=./a; read X; : > $X", tmp_path).segments[-1]
    assert read.redirects[0].target == "$X"  # read makes it unknown
    assert check("exec", {"command": "X=rm; $X -rf ./a"}, tmp_path).rule == "shell:dynamic-command"


@pytest.mark.parametrize("command", ["env -iS 'ls'", "env --split-string='ls -l'", "env -vS'id'"])
def test_env_split_string_in_any_spelling_is_refused(tmp_path: Path, command: str) -> None:
    assert check("exec", {"command": command}, tmp_path).rule == "shell:eval"


def test_env_options_after_the_command_are_the_commands_own(tmp_path: Path) -> None:
    assert (
        check("exec", {"command": "env LANG=C sort -S 1M ./words.txt"}, tmp_path).verdict is Verdict.CONFIRM
    )

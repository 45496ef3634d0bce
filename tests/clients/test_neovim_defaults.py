"""The Neovim defaults are written once (lua/mnemo/config.lua; lsp/mnemo.lua reads them) and shown in
:help mnemo-config: the help block must say exactly what config.lua sets. Read from the sources."""

from __future__ import annotations

import re
from pathlib import Path

NEOVIM = Path(__file__).resolve().parents[2] / "clients" / "neovim"


def assignments(block: str) -> list[str]:
    """``key = value`` of each line (comments and trailing commas dropped), nested tables flattened."""
    found = []
    for line in block.splitlines():
        code = line.split("--", 1)[0].strip().rstrip(",")
        if "=" in code:
            key, value = (part.strip() for part in code.split("=", 1))
            found.append(f"{key} = {value}")
    return found


def config_defaults() -> list[str]:
    source = (NEOVIM / "lua" / "mnemo" / "config.lua").read_text(encoding="utf-8")
    block = re.search(r"^M\.defaults = \{\n(.*?)^\}", source, re.M | re.S)
    assert block, "M.defaults not found in config.lua"
    lines = []
    for line in assignments(block.group(1)):  # `chat = { layout = 'vsplit', ... }` on one line
        key, value = line.split(" = ", 1)
        inner = re.fullmatch(r"\{ (.*) \}", value)
        if inner and "=" in inner.group(1):
            lines.append(f"{key} = {{")
            lines.extend(assignments(inner.group(1).replace(", ", ",\n")))
        else:
            lines.append(line)
    return lines


def help_defaults() -> list[str]:
    text = (NEOVIM / "doc" / "mnemo.txt").read_text(encoding="utf-8")
    block = re.search(r"merges \{opts\} over these defaults.*?>lua\n    \{\n(.*?)\n    \}\n<", text, re.S)
    assert block, ":help mnemo-config has no defaults block"
    return assignments(block.group(1))


def test_the_help_shows_the_defaults_config_lua_sets() -> None:
    expected = config_defaults()
    assert len(expected) >= 15 and "request_timeout_ms = 10000" in expected
    assert help_defaults() == expected


def test_the_server_config_reads_the_defaults_instead_of_repeating_them() -> None:
    source = (NEOVIM / "lsp" / "mnemo.lua").read_text(encoding="utf-8")
    assert "require('mnemo.config').defaults" in source
    assert not re.search(r"'mnemo', 'serve'|'mnemo.toml'|'markdown'", source)

"""One protocol contract: the server (server/mnemo/lsp/protocol.py and the handlers), the VS Code client
(clients/vscode/src/protocol.ts), the Neovim client (clients/neovim/lua/mnemo/protocol.lua) and
docs/protocol.md agree on method and command names, request parameter names and index states.

Read from the sources (ast for Python, patterns for TypeScript, Lua and Markdown), so nothing runs.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROTOCOL_PY = REPO / "server" / "mnemo" / "lsp" / "protocol.py"
HANDLERS = REPO / "server" / "mnemo" / "lsp" / "handlers"
MEMORY = REPO / "server" / "mnemo" / "memory"
PROTOCOL_TS = REPO / "clients" / "vscode" / "src" / "protocol.ts"
PROTOCOL_LUA = REPO / "clients" / "neovim" / "lua" / "mnemo" / "protocol.lua"
HEALTH_LUA = REPO / "clients" / "neovim" / "lua" / "mnemo" / "health.lua"
DOCS = REPO / "docs" / "protocol.md"
METHOD = re.compile(r"^mnemo/[a-zA-Z]+$")
COMMAND = re.compile(r"^mnemo\.[a-zA-Z]+$")


# -- the server ------------------------------------------------------------------------------------
@cache
def python_constants() -> dict[str, str]:
    """Module-level string constants of protocol.py (``MEMORY_SEARCH = "mnemo/memorySearch"``)."""
    tree = ast.parse(PROTOCOL_PY.read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            value = node.value.value
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(value, str):
                    found[target.id] = value
    return found


def python_names(pattern: re.Pattern[str]) -> set[str]:
    return {v for v in python_constants().values() if pattern.match(v)}


@cache
def python_params() -> dict[str, tuple[set[str], set[str]]]:
    """Params class -> (every key it reads, the required ones), from its ``_get(raw, "key", ...)`` calls."""
    tree = ast.parse(PROTOCOL_PY.read_text(encoding="utf-8"))
    found: dict[str, tuple[set[str], set[str]]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or not node.name.endswith("Params"):
            continue
        keys: set[str] = set()
        required: set[str] = set()
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_get":
                key = call.args[1]
                assert isinstance(key, ast.Constant) and isinstance(key.value, str)
                keys.add(key.value)
                if any(
                    k.arg == "required" and getattr(k.value, "value", None) is True for k in call.keywords
                ):
                    required.add(key.value)
            elif isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_kind":
                keys.add("kind")
        found[node.name] = (keys, required)
    return found


def _protocol_attr(node: ast.expr) -> str | None:
    """``protocol.NAME`` (or a bare NAME imported from it) -> its value."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    return python_constants().get(name) if name else None


def _parsed(function: ast.AST) -> set[str]:
    """The Params classes a handler parses (``protocol.XParams.parse(...)``)."""
    return {
        call.func.value.attr
        for call in ast.walk(function)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "parse"
        and isinstance(call.func.value, ast.Attribute)
    }


def _feature(call: ast.AST) -> str | None:
    """The method of a ``server.feature(protocol.X)`` call."""
    if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "feature" and call.args:
        method = _protocol_attr(call.args[0])
        return method if method and METHOD.match(method) else None
    return None


@cache
def server_requests() -> dict[str, set[str]]:
    """Each handler registered with ``server.feature(protocol.X)`` (as a decorator, or called on a
    module-level function) -> the Params classes it parses."""
    found: dict[str, set[str]] = {}
    for path in sorted(HANDLERS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = {
            n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for deco in node.decorator_list:
                    method = _feature(deco)
                    if method:
                        found[method] = _parsed(node)
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
                method = _feature(node.func)
                if method and node.args[0].id in functions:
                    found[method] = _parsed(functions[node.args[0].id])
    return found


def server_params(method: str) -> tuple[set[str], set[str]]:
    keys: set[str] = set()
    required: set[str] = set()
    for name in server_requests()[method]:
        k, r = python_params()[name]
        keys |= k
        required |= r
    return keys, required


@cache
def core_index_states() -> set[str]:
    """The states memory/status.py declares (``State = Literal[...]``, and ``IndexState.state``'s default)
    and every string the memory package assigns to a ``.state``."""
    states: set[str] = set()
    for node in ast.walk(ast.parse((MEMORY / "status.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "State":
            assert isinstance(node.value, ast.Subscript)
            states.update(ast.literal_eval(node.value.slice))
        if isinstance(node, ast.ClassDef) and node.name == "IndexState":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", "") == "state":
                    assert isinstance(item.value, ast.Constant)
                    states.add(item.value.value)
    for path in sorted(MEMORY.glob("*.py")):
        states |= _assigned_states(ast.parse(path.read_text(encoding="utf-8")))
    return states


def _assigned_states(tree: ast.AST) -> set[str]:
    """Strings assigned to ``x.state`` (also in tuple assignments)."""
    states: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = (
                    zip(target.elts, node.value.elts, strict=False)
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                    else [(target, node.value)]
                )
                for t, v in pairs:
                    if isinstance(t, ast.Attribute) and t.attr == "state" and isinstance(v, ast.Constant):
                        states.add(v.value)
    return states


# -- the VS Code client --------------------------------------------------------------------------------
def _ts() -> str:
    return PROTOCOL_TS.read_text(encoding="utf-8")


def ts_methods() -> dict[str, str]:
    """method -> its params type, from ``req<P, R>("mnemo/x")`` and ``note<P>("mnemo/x")``."""
    found = {}
    for match in re.finditer(r"=\s*(?:req|note)<(.+?)>\(\"(mnemo/\w+)\"\)", _ts()):
        params = match.group(1)
        if params.startswith("Record<"):
            params = "{}"
        found[match.group(2)] = params.split(",")[0].strip()
    return found


def ts_commands() -> set[str]:
    return set(re.findall(r"export const CMD_\w+ = \"(mnemo\.\w+)\"", _ts()))


def ts_fields(interface: str) -> tuple[set[str], set[str]]:
    """(every field, the required ones) of ``export interface NAME { ... }``; ``{}``: none."""
    if interface == "{}":
        return set(), set()
    body = re.search(rf"export interface {interface} \{{\n(.*?)\n\}}", _ts(), re.S)
    assert body, f"interface {interface} not found in protocol.ts"
    fields = re.findall(r"^  (\w+)(\??):", body.group(1), re.M)
    return {f for f, _ in fields}, {f for f, optional in fields if not optional}


def ts_index_states() -> set[str]:
    found = re.search(r"export type IndexState = ([^;]+);", _ts())
    assert found, "IndexState not found in protocol.ts"
    return set(re.findall(r"\"([^\"]+)\"", found.group(1)))


# -- the Neovim client ---------------------------------------------------------------------------------
def _lua() -> str:
    return PROTOCOL_LUA.read_text(encoding="utf-8")


def lua_names(pattern: re.Pattern[str]) -> set[str]:
    return {v for v in re.findall(r"^M\.\w+ = '([^']+)'", _lua(), re.M) if pattern.match(v)}


def lua_params(method: str) -> set[str] | None:
    """The keys in ``M.X = 'method' -- {a, b?} -> ...`` (None when the comment shows no params)."""
    line = re.search(rf"^M\.\w+ = '{re.escape(method)}' -- (?:[^{{]*?)\{{([^}}]*)\}}", _lua(), re.M)
    if line is None:
        return None
    return {k.strip().rstrip("?") for k in line.group(1).split(",") if k.strip()}


def lua_index_states() -> set[str]:
    found = re.search(r"^M\.INDEX_STATES = \{([^}]*)\}", _lua(), re.M)
    assert found, "M.INDEX_STATES not found in protocol.lua"
    return set(re.findall(r"'([^']+)'", found.group(1)))


# -- the documentation --------------------------------------------------------------------------------
def _docs() -> str:
    return DOCS.read_text(encoding="utf-8")


def doc_names(pattern: re.Pattern[str]) -> set[str]:
    headings = re.findall(r"^###.*$", _docs(), re.M)
    return {n for h in headings for n in re.findall(r"`([^`]+)`", h) if pattern.match(n)}


def doc_section(method: str) -> str:
    found = re.search(rf"^### `{re.escape(method)}`.*?(?=^##)", _docs() + "\n##", re.M | re.S)
    assert found, f"docs/protocol.md has no section for {method}"
    return found.group(0)


def doc_index_states() -> set[str]:
    found = re.search(r"^`state`: (.+)$", doc_section("mnemo/status"), re.M)
    assert found, "docs/protocol.md does not list the states of mnemo/status"
    return set(re.findall(r"`([^`]+)`", found.group(1).split(" (")[0]))  # the list, not what follows


# -- the checks ------------------------------------------------------------------------------------------
def _agree(found: dict[str, set[str]], expected: set[str]) -> None:
    """Each source names exactly ``expected``; the failure says what each one lacks or adds."""
    drift = {
        where: {"missing": sorted(expected - names), "extra": sorted(names - expected)}
        for where, names in found.items()
        if names != expected
    }
    assert drift == {}


def test_the_readers_find_something() -> None:
    """The patterns above still match the files (a rename must not turn every check into a pass)."""
    assert len(python_names(METHOD)) >= 20 and len(python_names(COMMAND)) >= 4
    assert len(server_requests()) >= 15 and server_params("mnemo/memorySearch")[1] == {"query"}
    assert {"ready", "error"} <= core_index_states()
    assert len(ts_methods()) >= 20 and ts_fields("MemorySearchParams")[1] == {"query"}
    assert len(lua_names(METHOD)) >= 20 and lua_params("mnemo/memoryGet") == {"path", "from", "lines"}
    assert len(doc_names(METHOD)) >= 20


def test_method_names_agree() -> None:
    server = python_names(METHOD)
    assert set(server_requests()) <= server, "a handler serves a method protocol.py does not name"
    _agree(
        {
            "protocol.py": server,
            "protocol.ts": set(ts_methods()),
            "protocol.lua": lua_names(METHOD),
            "docs/protocol.md": doc_names(METHOD),
        },
        server,
    )


def test_command_names_agree() -> None:
    server = python_names(COMMAND)
    _agree(
        {
            "protocol.ts": ts_commands(),
            "protocol.lua": lua_names(COMMAND),
            "docs/protocol.md": doc_names(COMMAND),
        },
        server,
    )


def test_every_client_request_is_served() -> None:
    """Each request the protocol names, except the server's own requests and notifications, has a handler."""
    to_client = {
        python_constants()[n] for n in ("INDEX_STATUS", "APPROVAL_REQUEST", "APPROVALS_CHANGED", "CHAT_DELTA")
    }
    assert python_names(METHOD) - to_client == set(server_requests())


@pytest.mark.parametrize("method", sorted(server_requests()))
def test_request_parameters_agree(method: str) -> None:
    """Every name a client sends is one the server reads; every name the server requires, clients send
    (and mark required); the docs name them all."""
    keys, required = server_params(method)
    ts_all, ts_required = ts_fields(ts_methods()[method])
    assert ts_all <= keys, f"protocol.ts sends {sorted(ts_all - keys)} that the server does not read"
    assert required <= ts_required, f"protocol.ts does not require {sorted(required - ts_required)}"
    lua = lua_params(method)
    assert lua is not None, f"protocol.lua shows no params for {method} ({{}} when none)"
    assert lua <= keys and required <= lua, f"protocol.lua: {sorted(lua)}; the server reads {sorted(keys)}"
    section = doc_section(method)
    missing = sorted(k for k in ts_all | required if f'"{k}"' not in section and f"`{k}`" not in section)
    assert missing == [], f"docs/protocol.md does not mention {missing} for {method}"


def test_index_states_agree() -> None:
    contract = python_constants()
    tree = ast.parse(PROTOCOL_PY.read_text(encoding="utf-8"))
    states = next(
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "INDEX_STATES"
    )
    assert "INDEX_STATES" not in contract  # a tuple, not a string constant
    assert core_index_states() <= set(states), "the core reports a state protocol.py does not list"
    _agree(
        {
            "protocol.ts": ts_index_states(),
            "protocol.lua": lua_index_states(),
            "docs/protocol.md": doc_index_states(),
        },
        set(states),
    )


# -- the status object ----------------------------------------------------------------------------------
def doc_status() -> dict[str, object]:
    """The documented mnemo/status result: its JSON example, with the ``chatModel`` example in it."""
    blocks = re.findall(r"```json\n(.*?)```", doc_section("mnemo/status"), re.S)
    assert len(blocks) >= 2, "docs/protocol.md: mnemo/status needs its result and chatModel examples"
    status: dict[str, object] = json.loads(blocks[0])
    status["chatModel"] = json.loads("{" + blocks[1] + "}")["chatModel"]
    return status


def health_reads(name: str) -> set[str]:
    """The fields clients/neovim/lua/mnemo/health.lua reads of the Lua table ``name`` (``status.files``)."""
    return set(re.findall(rf"\b{name}\.(\w+)", HEALTH_LUA.read_text(encoding="utf-8")))


def test_checkhealth_reads_only_documented_status_fields() -> None:
    """:checkhealth shows what mnemo/status sends: no field the server never sends."""
    documented = doc_status()
    assert health_reads("status") and health_reads("status") <= set(documented)
    for table, key in (("chat", "chatModel"), ("vectors", "vectors")):
        nested = documented[key]
        assert isinstance(nested, dict) and health_reads(table) <= set(nested), (table, health_reads(table))


def test_the_vscode_status_type_has_the_documented_fields() -> None:
    assert ts_fields("IndexStatus")[0] == set(doc_status())


def test_the_documented_status_is_what_the_server_sends() -> None:
    """docs/protocol.md's status example has exactly the fields mnemo.wire builds (nested ones too)."""
    from mnemo import wire
    from mnemo.agent.providers.auto import ChatSelection
    from mnemo.index.api import FileProblem
    from mnemo.memory.status import IndexStatus, SyncProgress, VectorProgress
    from mnemo.services import ServerStatus

    index = IndexStatus(
        "/ws", "/ws/.mnemo/index.duckdb", "ready", SyncProgress(1, 1, ""), "", 1, 2, "local", "m", 384,
        "hybrid", VectorProgress(1, 2, True), [], [], [FileProblem("memory/a.md", "too big")],
    )  # fmt: skip
    sent = wire.server_status(ServerStatus(index, ChatSelection("server", "openai", "m", "http://x/v1")))
    documented = doc_status()

    def shape(value: object) -> object:
        if isinstance(value, dict):
            return {k: shape(v) for k, v in value.items()}
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return [shape(value[0])]
        return None

    assert shape(sent) == shape(documented)
    shared = wire.index_status(index.shared("another process", "gateway"))
    assert set(shared) - set(sent) == {"writer", "role"} and "`writer`" in doc_section("mnemo/status")

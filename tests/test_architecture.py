"""Layering rules, checked on the source with ``ast``: the LSP stack stays out of the core, the core never
imports a front or the composition root, the fronts stay apart, and no mnemo module is in an import circle.

Layers (docs/architecture.md):
- fronts: the packages ``mnemo.lsp``, ``mnemo.gateway``, ``mnemo.cli`` and ``mnemo.__main__``;
- the composition root and what reads every front's settings: :data:`ROOT`;
- the wire format the fronts share (:data:`WIRE`: the core's typed results as JSON);
- the core: every other package and module of ``mnemo`` (found on disk, so a new one is covered).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "mnemo"
LSP_LIBRARIES = {"pygls", "lsprotocol"}
FRONTS = ("mnemo.lsp", "mnemo.gateway", "mnemo.cli", "mnemo.__main__")
"""Front packages and modules; ``mnemo.cli_*`` modules are fronts too (:func:`is_front`)."""
ROOT = ("mnemo.services", "mnemo.security")
"""The composition root, and the security audit, which reads every front's settings (the gateway's too)."""
WIRE = ("mnemo.wire",)
"""The wire format (camelCase JSON of docs/protocol.md), built by the fronts only: the core returns
dataclasses and never imports it."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def is_front(module: str) -> bool:
    return _within(module, FRONTS)


def is_root(module: str) -> bool:
    return _within(module, ROOT)


def is_wire(module: str) -> bool:
    return _within(module, WIRE)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST, *, type_checking: bool) -> list[ast.Import | ast.ImportFrom]:
    """Every import at any depth (function bodies too); ``if TYPE_CHECKING:`` bodies only when asked."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def imports(path: Path, *, type_checking: bool = True) -> set[str]:
    """Every module ``path`` imports, relative imports resolved, at any depth (function bodies too);
    ``from m import x`` gives both ``m`` and ``m.x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in _import_nodes(tree, type_checking=type_checking):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        if node.level:
            base = package[: len(package) - node.level + 1]
            module = ".".join([*base, node.module] if node.module else base)
        else:
            module = node.module or ""
        found.add(module)
        found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _sources() -> list[Path]:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20, "the package was not found"
    return files


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in _sources()}


def _targets(node: ast.Import | ast.ImportFrom, package: list[str], modules: set[str]) -> set[str]:
    """The mnemo modules one import statement runs: ``from pkg import x`` is ``pkg.x`` when that is a
    module, else ``pkg`` (a name its ``__init__`` defines)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    if node.level:
        base = package[: len(package) - node.level + 1]
        module = ".".join([*base, node.module] if node.module else base)
    else:
        module = node.module or ""
    found = set()
    for alias in node.names:
        if f"{module}.{alias.name}" in modules:
            found.add(f"{module}.{alias.name}")
        elif module in modules:
            found.add(module)
    return found


def import_graph() -> dict[str, set[str]]:
    """mnemo module -> the mnemo modules it imports at run time (lazy imports included, TYPE_CHECKING not)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in _import_nodes(tree, type_checking=False):
            targets |= _targets(node, package, set(modules))
        graph[name] = targets - {name}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:  # the package graph is shallow: recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(cycles)


def _path_in(cycle: list[str], graph: dict[str, set[str]]) -> str:
    """One circle through the component, for the failure message: a -> b -> a."""
    members, start = set(cycle), cycle[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                return " -> ".join([*paths[v], start])
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    return " / ".join(cycle)


def _hits(found: set[str], prefixes: set[str] | tuple[str, ...]) -> list[str]:
    return sorted(m for m in found if any(m == p or m.startswith(p + ".") for p in prefixes))


def core_units() -> list[str]:
    """Top-level core packages and modules of mnemo (everything that is neither a front nor root)."""
    units = {".".join(name.split(".")[:2]) for name in _modules() if name != "mnemo"}
    return sorted(u for u in units if not is_front(u) and not is_root(u) and not is_wire(u))


def test_imports_resolver() -> None:
    path = PACKAGE / "index" / "indexer.py"
    found = imports(path)
    assert "mnemo.index.store" in found and "mnemo.config" in found


def test_layers_cover_every_module() -> None:
    units = core_units()
    for expected in (
        "mnemo.agent",
        "mnemo.memory",
        "mnemo.editor",
        "mnemo.index",
        "mnemo.policy",
        "mnemo.config",
    ):
        assert expected in units
    assert "mnemo.security" not in units and "mnemo.cli" not in units and "mnemo.wire" not in units
    assert is_front("mnemo.cli.chat") and is_front("mnemo.cli.main") and is_front("mnemo.gateway.rpc")
    assert (
        not is_front("mnemo.memory.citations")
        and not is_front("mnemo.client")
        and not is_front("mnemo.clients")
    )  # prefixes, not substrings
    for name in (*ROOT, *WIRE):
        assert name in _modules(), f"{name} is listed in ROOT or WIRE but does not exist"


def test_lsp_libraries_only_in_lsp_package() -> None:
    offenders = {}
    for path in _sources():
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "lsp":
            continue
        bad = _hits(imports(path), tuple(LSP_LIBRARIES))
        if bad:
            offenders[str(rel)] = bad
    assert offenders == {}


def test_duckdb_is_imported_through_one_module() -> None:
    """Every module takes DuckDB from ``mnemo.index.duckdb_native`` (the compiled engine without the
    ``duckdb`` package's Python layer, ~50 ms of every one-shot command)."""
    offenders = {}
    for path in _sources():
        rel = path.relative_to(PACKAGE)
        bad = _hits(imports(path), ("duckdb", "_duckdb"))
        if bad and rel.as_posix() != "index/duckdb_native.py":
            offenders[str(rel)] = bad
    assert offenders == {}
    assert _hits(imports(PACKAGE / "index" / "duckdb_native.py"), ("_duckdb",))  # the one import


@pytest.mark.parametrize("unit", core_units())
def test_core_does_not_import_front_ends_or_the_root(unit: str) -> None:
    offenders = {}
    for name, path in _modules().items():
        if _within(name, (unit,)):
            bad = sorted(
                m
                for m in imports(path)
                if m.startswith("mnemo.") and (is_front(m) or is_root(m) or is_wire(m))
            )
            if bad:
                offenders[str(path.relative_to(PACKAGE))] = bad
    assert offenders == {}


@pytest.mark.parametrize(
    ("front", "others"), [("mnemo.lsp", ("mnemo.gateway",)), ("mnemo.gateway", ("mnemo.lsp",))]
)
def test_fronts_stay_apart(front: str, others: tuple[str, ...]) -> None:
    """The editor's server and the gateway share the core, never each other (nor the CLI)."""
    offenders = {}
    for name, path in _modules().items():
        if _within(name, (front,)):
            bad = sorted(m for m in imports(path) if _within(m, (*others, "mnemo.cli")))
            if bad:
                offenders[name] = bad
    assert offenders == {}


def test_cycle_finder_finds_circles_and_skips_type_checking_imports(tmp_path: Path) -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []
    source = tmp_path / "x.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mnemo.a\n"
        "def f():\n    import mnemo.b\n",
        encoding="utf-8",
    )
    tree = ast.parse(source.read_text(encoding="utf-8"))
    names = {a.name for n in _import_nodes(tree, type_checking=False) for a in n.names}
    assert names == {"TYPE_CHECKING", "mnemo.b"}  # the lazy import counts, the TYPE_CHECKING one not


def test_no_import_circles() -> None:
    """No mnemo module reaches itself through imports, lazy imports inside functions included (only
    ``if TYPE_CHECKING:`` imports are left out: they never run)."""
    graph = import_graph()
    assert (
        "mnemo.lsp.server" in graph["mnemo.lsp.setup"]
        and "mnemo.gateway.rpc" in graph["mnemo.gateway.server"]
    )
    assert [_path_in(c, graph) for c in find_cycles(graph)] == []


def test_the_rpc_front_is_given_what_it_uses_not_the_gateway() -> None:
    """gateway/server.py builds the RPC front; the front never imports it back, not even for types."""
    assert not _hits(imports(PACKAGE / "gateway" / "rpc.py"), ("mnemo.gateway.server",))
    assert not _hits(imports(PACKAGE / "lsp" / "server.py"), ("mnemo.lsp.setup", "mnemo.lsp.handlers"))


def test_the_wire_format_is_built_by_the_fronts_alone() -> None:
    """Only fronts import mnemo.wire, and it loads no other mnemo module at run time (the LSP server
    imports it before ``initialize`` is answered): the core's types are for type checking only."""
    users = sorted(
        name for name, path in _modules().items() if _hits(imports(path), WIRE) and not is_wire(name)
    )
    assert users and all(is_front(name) for name in users), users
    assert {"mnemo.lsp.handlers.search", "mnemo.gateway.rpc", "mnemo.cli.chat"} <= set(users)
    assert import_graph()["mnemo.wire"] == set()

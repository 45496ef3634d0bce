"""Layering rules, checked on the source with ``ast``: the LSP stack stays out of the core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "mnemo"
LSP_LIBRARIES = {"pygls", "lsprotocol"}
CORE = ("workspace", "index", "search", "markdown", "text", "embeddings", "secrets", "policy")
FRONT_ENDS = ("mnemo.lsp", "mnemo.cli", "mnemo.services")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved, at any depth (function bodies too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
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


def _hits(found: set[str], prefixes: set[str] | tuple[str, ...]) -> list[str]:
    return sorted(m for m in found if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_imports_resolver() -> None:
    path = PACKAGE / "index" / "indexer.py"
    found = imports(path)
    assert "mnemo.index.store" in found and "mnemo.config" in found


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


@pytest.mark.parametrize("package", CORE)
def test_core_does_not_import_front_ends(package: str) -> None:
    base = PACKAGE / package
    files = sorted(base.rglob("*.py")) if base.is_dir() else []
    offenders = {str(p.relative_to(PACKAGE)): _hits(imports(p), FRONT_ENDS) for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}

"""prtoggle's modules import one another without circles, type-only and lazy imports included."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "prtoggle"


def test_no_module_of_prtoggle_imports_itself_through_others() -> None:
    graph = _import_graph(PACKAGE)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def _import_graph(package: Path) -> dict[str, set[str]]:
    """Every import statement (top level, under TYPE_CHECKING, inside functions), by module."""
    files = {_module_name(path): path for path in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & set(files)
                imported.update(submodules or {node.module})  # `from pkg import mod`: mod
        graph[name] = {module for module in imported if module in files} - {name}
    return graph


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

"""The layer rules: which parts of prtoggle/ may import which, as a table here and in the docs.

A part is a top-level package or module of prtoggle/. Every import counts (top level,
type-only, inside functions), as in the import graph of docs/internals.md. The table of
docs/internals.md ("may import") must be this one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "prtoggle"
BOTTOM = {"errors", "protocol"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "protocol": set(),
    "patching": {"errors", "protocol"},
    "recipes": {*BOTTOM, "patching"},
    "revert": {*BOTTOM, "patching", "recipes"},
    "detect": {*BOTTOM},
    "runners": {*BOTTOM, "patching", "recipes", "revert", "detect"},
    "pytest_plugin": {*BOTTOM, "patching", "recipes", "revert", "runners", "detect"},
    "commands": {*BOTTOM, "patching", "recipes", "revert", "runners", "detect", "pytest_plugin"},
    "cli": {*BOTTOM, "patching", "recipes", "revert", "runners", "detect", "commands"},
    "_bootstrap": {*BOTTOM, "revert"},
    "__init__": {*BOTTOM, "revert"},
    "__main__": {"cli"},
}
"""Part -> the parts it may import. The order of the layers, bottom up: errors and protocol;
patching; recipes; revert; runners (detect beside them, on the bottom only); pytest_plugin
and commands; cli; the package's entry points."""


def imports_between_parts() -> dict[str, set[str]]:
    """Part -> the other parts its modules import (absolute imports, any depth)."""
    edges: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        source = parts[0] if len(parts) > 1 else path.stem
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                pieces = name.split(".")
                if pieces[0] == "prtoggle" and len(pieces) > 1 and pieces[1] != source:
                    edges.setdefault(source, set()).add(pieces[1])
    return edges


def _imported_modules(path: Path) -> list[str]:
    """Every module `path` imports absolutely (top level, type-only, inside functions)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def documented_table() -> dict[str, set[str]]:
    """The "may import" table of docs/internals.md."""
    text = (ROOT / "docs" / "internals.md").read_text()
    table = text.split("| part | may import |", 1)[1].split("\n\n", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in table.strip().splitlines()[1:]:
        part, allowed = (cell.strip() for cell in line.strip("|").split("|"))
        rows[part.strip("`")] = set(re.findall(r"`([\w]+)`", allowed))
    return rows


def test_every_part_of_the_package_has_a_row() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert packages | modules == set(ALLOWED)


def test_no_part_imports_a_part_its_row_does_not_allow() -> None:
    upward = {
        f"{part} -> {other}"
        for part, others in imports_between_parts().items()
        for other in others - ALLOWED[part]
    }
    assert upward == set()


def test_the_table_of_docs_internals_is_the_table_of_this_test() -> None:
    assert documented_table() == ALLOWED


def test_cli_imports_commands_and_commands_never_import_cli() -> None:
    edges = imports_between_parts()
    assert "commands" in edges["cli"]
    assert "cli" not in ALLOWED["commands"]
    assert "cli" not in edges["commands"]


def test_bench_scripts_import_no_cli_module() -> None:
    imports = {
        f"{path.name}: {name}"
        for path in sorted((ROOT / "bench").glob("*.py"))
        for name in _imported_modules(path)
        if name == "prtoggle.cli" or name.startswith("prtoggle.cli.")
    }
    assert imports == set()


def test_the_check_sees_an_import_upward() -> None:
    assert "cli" not in ALLOWED["recipes"]
    assert "recipes" in imports_between_parts()["revert"]

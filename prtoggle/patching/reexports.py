"""Names a module imports from elsewhere (`from X import f`, `import X as f`), read statically."""

from __future__ import annotations

import ast
from dataclasses import dataclass

MAX_REEXPORT_HOPS = 8
"""How many `from X import name` steps a static lookup follows before it gives up."""


@dataclass(frozen=True)
class ImportBinding:
    """A name a module binds by an import statement at `line`.

    `level` is the import's relative level (0: absolute), `module` the dotted module it
    names ('' for `from . import name`), `name` the attribute imported from it (None for
    `import X [as y]`, which binds the module itself).
    """

    line: int
    level: int
    module: str
    name: str | None

    def origin(self, *, package: str) -> str | None:
        """The dotted path of what the name is bound to, in the importing module's package.

        None when a relative import climbs above the top-level package.
        """
        base = self.module
        if self.level:
            parts = package.split(".") if package else []
            if self.level > len(parts):
                return None
            kept = parts[: len(parts) - self.level + 1]
            base = ".".join([*kept, self.module] if self.module else kept)
        return base if self.name is None else f"{base}.{self.name}"


def import_bindings(module: ast.Module) -> dict[str, ImportBinding]:
    """The names `module` binds by import statements run at import time, by name.

    Statements of the module body, of `if` branches (not `if TYPE_CHECKING:`) and of `try`
    bodies (not their `except` handlers, which run only when the import failed) count;
    a later statement wins, as at run time. Star imports bind nothing that is listed.
    """
    found: dict[str, ImportBinding] = {}
    for node in _run_statements(module.body):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    binding = ImportBinding(node.lineno, node.level, node.module or "", alias.name)
                    found[alias.asname or alias.name] = binding
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None:
                    found[alias.asname] = ImportBinding(node.lineno, 0, alias.name, None)
                else:
                    top = alias.name.split(".", 1)[0]
                    found[top] = ImportBinding(node.lineno, 0, top, None)
    return found


def package_of(module_name: str, *, is_package: bool) -> str:
    """The package a module's relative imports start from (itself for an `__init__`)."""
    return module_name if is_package else module_name.rpartition(".")[0]


def is_type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING` (false when the module runs)."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _run_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of `body` in source order, with those of `if` and `try` blocks."""
    ordered: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            if not is_type_checking(node.test):
                ordered.extend(_run_statements(node.body))
            ordered.extend(_run_statements(node.orelse))
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                ordered.extend(_run_statements(block))
        else:
            ordered.append(node)
    return ordered

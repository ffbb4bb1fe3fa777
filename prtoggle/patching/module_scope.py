"""What a module's source binds in its own scope, read once per file: its names and its imports."""

from __future__ import annotations

import ast
import contextlib
import functools
import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from prtoggle.patching.lines import decode_python_source
from prtoggle.patching.reexports import is_type_checking

CACHE_SIZE = 128
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_NEW_SCOPES = (*_DEFINITIONS, ast.Lambda)


ImportChange = tuple[frozenset[str], frozenset[str]]
"""(names imported by the revert, names it removes) in one module."""


@dataclass(frozen=True)
class ModuleScope:
    """A module file's top-level names: `bound` as `module_level_names` reads them (None: a
    star import makes them unknown), `imported` every name an import statement binds in
    the module's scope (conditional and `if TYPE_CHECKING:` ones included)."""

    bound: frozenset[str] | None
    imported: frozenset[str]
    from_imports: frozenset[tuple[int, str, str, str]] = frozenset()
    """(level, module, name, local name) of each `from module import name [as local]`."""

    def imports_from(self, module: str, *, package: str) -> frozenset[tuple[str, str]]:
        """(name, local name) of what this file imports from `module` by name, relative
        imports resolved against `package` (the file's own package)."""
        found = set()
        for level, source, name, local in self.from_imports:
            if _absolute(level, source, package) == module:
                found.add((name, local))
        return frozenset(found)


def imported_names(tree: ast.Module) -> frozenset[str]:
    """Every name an `import` or `from ... import` binds in the module's own scope, at any
    depth of `if`, `try`, `with`, loops (never inside a def, class or lambda).

    Python compiles `name.attr(...)` differently when `name` is imported in the module
    scope (CPython 3.11: LOAD_ATTR instead of LOAD_METHOD), whether the import runs or not:
    code compiled apart from its module must know these names to be the same code.
    """
    names: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif not isinstance(node, _NEW_SCOPES):
            pending.extend(child for child in ast.iter_child_nodes(node) if _may_hold(child))
    return frozenset(names)


def module_level_names(module: ast.Module) -> frozenset[str] | None:
    """Names the module binds at its top level (None: a star import makes them unknown).

    The body of `if TYPE_CHECKING:` is left out: it never runs.
    """
    names: set[str] = set()
    pending: list[ast.stmt] = list(module.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, _DEFINITIONS):
            names.add(node.name)
        elif isinstance(node, ast.If) and is_type_checking(node.test):
            pending.extend(node.orelse)  # the body runs for type checkers only
        else:
            names.update(
                child.id
                for child in ast.walk(node)
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store)
            )
            for field in ("body", "orelse", "finalbody", "handlers"):
                pending.extend(
                    child for child in getattr(node, field, []) if isinstance(child, ast.stmt)
                )
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
    return frozenset(names)


def imports_declaration(names: Collection[str]) -> list[ast.stmt]:
    """`if 0: import a, b, ...`: statements that make `names` imported names of the scope
    they are compiled in, without running anything (the compiler drops the block)."""
    if not names:
        return []
    body: list[ast.stmt] = [ast.Import(names=[ast.alias(name=n) for n in sorted(names)])]
    return [ast.If(test=ast.Constant(value=0), body=body, orelse=[])]


def module_scope(filename: str) -> ModuleScope | None:
    """The ModuleScope of the source file `filename` (None: unreadable or not Python).

    Parsed once per version of the file (its modification time and size; the last
    CACHE_SIZE kept): a revert reads it for each function it compiles and for its global
    check, and a warm server prepares it ahead (prepared_sources).
    """
    try:
        info = os.stat(filename)
    except OSError:
        return None
    return _scope_of_file(filename, info.st_mtime_ns, info.st_size)


def imported_in(module: str, filename: str | None) -> frozenset[str]:
    """The names module `module` (source file `filename`) imports in its scope, as the
    revert being landed leaves them (see imports_changed)."""
    found = module_scope(filename) if filename else None
    names = frozenset() if found is None else found.imported
    added, removed = _IMPORT_CHANGES.get(module, (frozenset(), frozenset()))
    return (names - removed) | added


@contextlib.contextmanager
def imports_changed(changes: Mapping[str, ImportChange]) -> Iterator[None]:
    """While a revert lands: per module, the import names its `define`s bind (added) and the
    names it removes, so the code it compiles there compiles as in the pre-fix module.
    Process-global for the duration (a landing runs under the revert lock)."""
    saved = dict(_IMPORT_CHANGES)
    _IMPORT_CHANGES.update(changes)
    try:
        yield
    finally:
        _IMPORT_CHANGES.clear()
        _IMPORT_CHANGES.update(saved)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _scope_of_file(filename: str, _mtime_ns: int, _size: int) -> ModuleScope | None:
    try:
        with open(filename, "rb") as stream:
            tree = ast.parse(decode_python_source(stream.read()))
    except (OSError, SyntaxError, ValueError):
        return None
    return ModuleScope(
        bound=module_level_names(tree),
        imported=imported_names(tree),
        from_imports=frozenset(
            (node.level, node.module or "", alias.name, alias.asname or alias.name)
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        ),
    )


def _absolute(level: int, module: str, package: str) -> str:
    if not level:
        return module
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    return ".".join([*base, module] if module else base)


def _may_hold(node: ast.AST) -> bool:
    """Whether a statement's child may hold statements of the same scope (an expression
    holds no statement; a handler or a match case does)."""
    return isinstance(node, ast.stmt | ast.excepthandler | ast.match_case)


_IMPORT_CHANGES: dict[str, ImportChange] = {}
"""Module -> ImportChange of the revert landing now (see imports_changed)."""

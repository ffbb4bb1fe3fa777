"""Copies of a module's names elsewhere: names bound by importing them, read from source.

A copy of `m.X` is a top-level name of another loaded module that its source binds by an
import of that name: `from m import X`, `from m import X as Y`, `from m import *` (X
exported: in `m.__all__`, or public without one), at any depth of `if`, `try`, `with` or
loops (never in a def or class; never `if TYPE_CHECKING:`), relative imports included, and
through re-exports (`from m import X` in package `p`, then `from p import X` elsewhere).
The importing module must still hold the very object. Holding the same object is never
enough: `()`, `None`, a small int or a type are everyone's, and a value the scope took
from a third-party module is that module's too. A module that holds the object but whose
source cannot be read (`python -c`'s `__main__`, a module made in memory, a compiled
extension) cannot be told apart: it is returned as unreadable, for the caller to say, and
never changed. Process-global: each file's imports, read once per (path, mtime, size).
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType

from prtoggle.patching.lines import decode_python_source
from prtoggle.patching.reexports import ImportBinding, is_type_checking

_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_SOURCE_SUFFIXES = (".py", ".pyw")


@dataclass(frozen=True)
class Holding:
    """`module_name.attribute` holds the object of the scope's `scope_name`."""

    module_name: str
    module: object
    attribute: str
    scope_name: str


@dataclass(frozen=True)
class Copies:
    """What find_copies found: the copies, and holders whose source cannot be read."""

    copies: tuple[Holding, ...] = ()
    unreadable: tuple[Holding, ...] = ()


def find_copies(scope: ModuleType, values: Mapping[str, object]) -> Copies:
    """The copies of `values` (name -> object bound in module `scope`) in other loaded modules.

    Only objects still held elsewhere are looked for (by identity, a candidate); a candidate
    is a copy when its module's source binds that name by an import of the scope's name.
    """
    candidates = _candidates(scope, values)
    holders: dict[str, tuple[object, dict[str, str]]] = {
        scope.__name__: (scope, {name: name for name in values})
    }
    found: dict[tuple[str, str], Holding] = {}
    imports = {name: _imports_of(module) for name, (module, _) in candidates.items()}
    grew = True
    while grew:  # a copy may be the source of the next (re-exports)
        grew = False
        for name, (module, held) in candidates.items():
            bindings = imports[name]
            for attribute, scope_name in held:
                if bindings is None or (name, attribute) in found:
                    continue
                if _bound_from(bindings, attribute, scope_name, holders, _package(module)):
                    found[(name, attribute)] = Holding(name, module, attribute, scope_name)
                    holders.setdefault(name, (module, {}))[1][attribute] = scope_name
                    grew = True
    common = {name for name, value in values.items() if _common(value, scope)}
    unreadable = _unreadable(candidates, imports, found, known=common)
    return Copies(copies=tuple(found.values()), unreadable=unreadable)


def clear_cache() -> None:
    """Forget every file's imports read so far."""
    _IMPORTS.clear()


def _candidates(
    scope: ModuleType, values: Mapping[str, object]
) -> dict[str, tuple[object, list[tuple[str, str]]]]:
    """Per other loaded module: (module, [(attribute, scope name)]) holding a value itself.

    A common value (None, a small int, an interned string, a type of elsewhere) is looked
    for under its own name only: under another name it is a coincidence, never an import
    (an alias of one, `from m import FLAG as _F`, is not followed).
    """
    by_id = {id(v): n for n, v in values.items() if not _common(v, scope)}
    common = {n: v for n, v in values.items() if _common(v, scope)}
    found: dict[str, tuple[object, list[tuple[str, str]]]] = {}
    for module_name, module in list(sys.modules.items()):
        if module is scope or module is None:
            continue
        try:
            namespace = vars(module)
        except TypeError:
            continue
        held = list(_held(namespace, values, by_id, common))
        if held:
            found[module_name] = (module, held)
    return found


def _held(
    namespace: Mapping[str, object],
    values: Mapping[str, object],
    by_id: Mapping[int, str],
    common: Mapping[str, object],
) -> Iterator[tuple[str, str]]:
    for name, value in common.items():
        if namespace.get(name, _MISSING) is value:
            yield name, name
    if by_id:
        for attribute, value in list(namespace.items()):
            scope_name = by_id.get(id(value))
            if scope_name is not None and values[scope_name] is value:
                yield attribute, scope_name


def _bound_from(
    bindings: tuple[tuple[str, str, str], ...],
    attribute: str,
    scope_name: str,
    holders: Mapping[str, tuple[object, Mapping[str, str]]],
    package: str,
) -> bool:
    """Whether one of `bindings` (source module as written, name, local) binds `attribute`
    from a holder of `scope_name`: the scope, or a copy found so far."""
    for written, name, local in bindings:
        holder = holders.get(_absolute(written, package))
        if holder is None:
            continue
        module, held = holder
        if name == "*":
            if held.get(attribute) == scope_name and _star_exports(module, attribute):
                return True
        elif local == attribute and held.get(name) == scope_name:
            return True
    return False


def _unreadable(
    candidates: Mapping[str, tuple[object, list[tuple[str, str]]]],
    imports: Mapping[str, tuple[tuple[str, str, str], ...] | None],
    found: Mapping[tuple[str, str], Holding],
    *,
    known: set[str],
) -> tuple[Holding, ...]:
    """Holders whose source cannot be read, of objects no readable module holds for itself
    (an object a readable module also holds without a copy, torch's `bfloat16`, is that
    module's: an unreadable holder got it there, not from the scope). Common values
    (`known`: None, a small int, ...) are everyone's: never said."""
    shared = known | {
        scope_name
        for name, (_, held) in candidates.items()
        if imports[name] is not None
        for attribute, scope_name in held
        if (name, attribute) not in found
    }
    return tuple(
        Holding(name, module, attribute, scope_name)
        for name, (module, held) in candidates.items()
        if imports[name] is None
        for attribute, scope_name in held
        if scope_name not in shared
    )


def _imports_of(module: object) -> tuple[tuple[str, str, str], ...] | None:
    """(module as written, name, local) of each `from ... import` the module's source runs
    at its top level, the module relative-prefixed by dots; None: no readable source."""
    filename = getattr(module, "__file__", None)
    if isinstance(filename, str) and filename.endswith(_SOURCE_SUFFIXES):
        try:
            info = os.stat(filename)
        except OSError:
            return _from_loader(module)
        key = (info.st_mtime_ns, info.st_size)
        cached = _IMPORTS.get(filename)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            with open(filename, "rb") as stream:
                found = _from_imports(decode_python_source(stream.read()))
        except (OSError, SyntaxError, ValueError):
            return None
        _IMPORTS[filename] = (key, found)
        return found
    return _from_loader(module)


def _from_loader(module: object) -> tuple[tuple[str, str, str], ...] | None:
    """The imports of a module whose source only its loader has (a zip archive)."""
    loader = getattr(module, "__loader__", None)
    get_source = getattr(loader, "get_source", None)
    if get_source is None:
        return None
    try:
        text = get_source(getattr(module, "__name__", ""))
        return None if text is None else _from_imports(text)
    except (ImportError, OSError, SyntaxError, ValueError, TypeError):
        return None


def _from_imports(text: str) -> tuple[tuple[str, str, str], ...]:
    found: list[tuple[str, str, str]] = []
    pending: list[ast.AST] = list(ast.parse(text).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.ImportFrom):
            written = "." * node.level + (node.module or "")
            found.extend((written, a.name, a.asname or a.name) for a in node.names)
        elif isinstance(node, ast.If) and is_type_checking(node.test):
            pending.extend(node.orelse)
        elif not isinstance(node, _NEW_SCOPES):
            pending.extend(
                child
                for child in ast.iter_child_nodes(node)
                if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case)
            )
    return tuple(found)


def _star_exports(module: object, name: str) -> bool:
    """Whether `from module import *` binds `name`: listed in `__all__`, else public."""
    listed = getattr(module, "__all__", None)
    if isinstance(listed, list | tuple):
        return name in listed
    return not name.startswith("_")


def _absolute(written: str, package: str) -> str:
    level = len(written) - len(written.lstrip("."))
    binding = ImportBinding(line=0, level=level, module=written[level:], name=None)
    return binding.origin(package=package) or ""


def _package(module: object) -> str:
    package = getattr(module, "__package__", None)
    return package if isinstance(package, str) else ""


def _common(value: object, scope: ModuleType) -> bool:
    """A value many modules hold for themselves: the same object is no sign of an import."""
    if value is None or value is Ellipsis or value is NotImplemented or isinstance(value, bool):
        return True
    if type(value) is int:
        return -5 <= value <= 256
    if type(value) is str:
        return len(value) <= 1 or value.isidentifier()
    if type(value) in (tuple, frozenset, bytes):
        return len(value) <= (1 if type(value) is bytes else 0)  # type: ignore[arg-type]
    if isinstance(value, type):
        return value.__module__ != scope.__name__
    return False


class _Missing:
    """A name a namespace does not bind."""


_MISSING = _Missing()
_IMPORTS: dict[str, tuple[tuple[int, int], tuple[tuple[str, str, str], ...]]] = {}
"""File name -> ((mtime_ns, size), its `from` imports): read once per version of a file."""

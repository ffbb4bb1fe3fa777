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
never changed. Only modules holding the very object are read: their column-0 `from`
imports by a pattern, the file parsed only when an indented import of the name may be a
function's own. Process-global: each file's imports, read once per (path, mtime, size).
Within `one_scan()` (a landing asks for the copies of many scopes) each module's objects
are gathered once, not once per scope.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType

from prtoggle.patching.lines import decode_python_source
from prtoggle.patching.reexports import ImportBinding, is_type_checking

_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_SOURCE_SUFFIXES = (".py", ".pyw")
_FROM_IMPORT = re.compile(
    r"^([ \t]*)from[ \t]+([.\w]+)[ \t]+import[ \t]*(\([^)]*\)|(?:[^\n\\]|\\\n)*)", re.M
)
"""`from X import names` at a line's start: its indentation, X, and the names as written."""
_COMMENT = re.compile(r"#[^\n]*")

Binding = tuple[str, str, str]
"""(module as written, relative dots included; name imported, `*` for all; local name)."""


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
    imports = {name: _source_of(module) for name, (module, _) in candidates.items()}
    grew = True
    while grew:  # a copy may be the source of the next (re-exports)
        grew = False
        for name, (module, held) in candidates.items():
            source = imports[name]
            for attribute, scope_name in held:
                if source is None or (name, attribute) in found:
                    continue
                bindings = source.bindings_of(attribute)
                if _bound_from(bindings, attribute, scope_name, holders, _package(module)):
                    found[(name, attribute)] = Holding(name, module, attribute, scope_name)
                    holders.setdefault(name, (module, {}))[1][attribute] = scope_name
                    grew = True
    common = {name for name, value in values.items() if _common(value, scope)}
    unreadable = _unreadable(candidates, imports, found, known=common)
    return Copies(copies=tuple(found.values()), unreadable=unreadable)


def clear_cache() -> None:
    """Forget every file's imports read so far."""
    _SOURCES.clear()


@contextlib.contextmanager
def one_scan() -> Iterator[None]:
    """While it lasts, find_copies gathers the objects of each module's namespace once (the
    ids, kept while the namespace keeps its size) rather than once per call: a landing
    that replaces names of a dozen modules passed over every loaded module a dozen times.
    A module whose namespace grew or shrank since is gathered again; a name rebound to
    another object without changing the size is seen only when its module is gathered
    next. Process-global (the landing holds the revert lock); nested uses share one."""
    if _SCANS:
        yield
        return
    _SCANS.append(_Scan())
    try:
        yield
    finally:
        _SCANS.clear()


def _candidates(
    scope: ModuleType, values: Mapping[str, object]
) -> dict[str, tuple[object, list[tuple[str, str]]]]:
    """Per other loaded module: (module, [(attribute, scope name)]) holding a value itself.

    A common value (None, a small int, an interned string, a type of elsewhere) is looked
    for under its own name only: under another name it is a coincidence, never an import
    (an alias of one, `from m import FLAG as _F`, is not followed).
    """
    by_id: dict[int, list[str]] = {}
    for name, value in values.items():
        if not _common(value, scope):
            by_id.setdefault(id(value), []).append(name)  # `A = B = obj`: both names
    common = {n: v for n, v in values.items() if _common(v, scope)}
    found: dict[str, tuple[object, list[tuple[str, str]]]] = {}
    for module_name, module in list(sys.modules.items()):
        if module is scope or module is None:
            continue
        try:
            namespace = vars(module)
        except TypeError:
            continue
        held = list(_held(namespace, values, by_id, common, _objects_of(module_name, namespace)))
        if held:
            found[module_name] = (module, held)
    for scan in _SCANS:
        scan.calls += 1
    return found


def _held(
    namespace: Mapping[str, object],
    values: Mapping[str, object],
    by_id: Mapping[int, list[str]],
    common: Mapping[str, object],
    objects: Iterable[int],
) -> Iterator[tuple[str, str]]:
    for name, value in common.items():
        if namespace.get(name, _MISSING) is value:
            yield name, name
    if by_id and not by_id.keys().isdisjoint(objects):  # C-level first
        for attribute, value in list(namespace.items()):
            for scope_name in by_id.get(id(value), ()):
                if values[scope_name] is value:
                    yield attribute, scope_name


def _bound_from(
    bindings: tuple[Binding, ...],
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
    imports: Mapping[str, _Source | None],
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


@dataclass
class _Source:
    """The `from` imports of one module's source: (module as written, name, local) each.

    `top`: the statements at column 0, read by a pattern (fast); `nested`: the local names
    of indented ones, which may sit in a def or class: for those the file is parsed
    (`full`, at most once) to tell a module-level import from a function's own."""

    filename: str | None
    top: tuple[Binding, ...]
    nested: frozenset[str]
    text: str | None = None  # kept only for a source that has no file (a loader's)
    full: tuple[Binding, ...] | None = None

    def bindings_of(self, local: str) -> tuple[Binding, ...]:
        """The imports to search for one that binds `local` at the module's top level."""
        if local not in self.nested and "*" not in self.nested:
            return self.top
        if self.full is None:
            text = self.text if self.filename is None else _read(self.filename)
            self.full = () if text is None else _parsed_imports(text)
        return self.full


def _source_of(module: object) -> _Source | None:
    """The imports of `module`'s source, its file's read once per version; None: no
    readable source (made in memory, `python -c`, compiled, sourceless)."""
    filename = getattr(module, "__file__", None)
    if not (isinstance(filename, str) and filename.endswith(_SOURCE_SUFFIXES)):
        text = _loader_source(module)
        return None if text is None else _scanned(None, text)
    try:
        info = os.stat(filename)
    except OSError:
        return None
    key = (info.st_mtime_ns, info.st_size)
    cached = _SOURCES.get(filename)
    if cached is not None and cached[0] == key:
        return cached[1]
    text = _read(filename)
    if text is None:
        return None
    found = _scanned(filename, text)
    _SOURCES[filename] = (key, found)
    return found


def _scanned(filename: str | None, text: str) -> _Source:
    top: list[Binding] = []
    nested: set[str] = set()
    for match in _FROM_IMPORT.finditer(text):
        indent, written, names = match.groups()
        bindings = _listed(written, names)
        if indent:
            nested.update(local for _, _, local in bindings)
        else:
            top.extend(bindings)
    return _Source(
        filename=filename,
        top=tuple(top),
        nested=frozenset(nested),
        text=text if filename is None else None,
    )


def _listed(written: str, names: str) -> list[Binding]:
    """(written, name, local) of `a, b as c` (parenthesised, commented, continued)."""
    if not names.startswith("("):
        names = names.split(";", 1)[0]  # `from m import a; b = 1`
    cleaned = _COMMENT.sub("", names).replace("\\\n", " ").strip().strip("()")
    found = []
    for item in cleaned.split(","):
        parts = item.split()
        if len(parts) == 1:
            found.append((written, parts[0], parts[0]))
        elif len(parts) == 3 and parts[1] == "as":
            found.append((written, parts[0], parts[2]))
    return found


def _read(filename: str) -> str | None:
    try:
        with open(filename, "rb") as stream:
            return decode_python_source(stream.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _loader_source(module: object) -> str | None:
    """The source of a module that only its loader has (a zip archive); None: none."""
    loader = getattr(module, "__loader__", None)
    get_source = getattr(loader, "get_source", None)
    if get_source is None:
        return None
    try:
        text = get_source(getattr(module, "__name__", ""))
    except (ImportError, OSError, SyntaxError, ValueError, TypeError):
        return None
    return text if isinstance(text, str) else None


def _parsed_imports(text: str) -> tuple[Binding, ...]:
    """Every `from` import the module's top level runs, at any depth of if/try/with/loops."""
    try:
        pending: list[ast.AST] = list(ast.parse(text).body)
    except (SyntaxError, ValueError):
        return ()
    found: list[Binding] = []
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


def _objects_of(module_name: str, namespace: Mapping[str, object]) -> Iterable[int]:
    """The ids of the objects `namespace` holds: gathered as they are read, or, from the
    second call of a scan on, kept per module (see one_scan)."""
    scan = _SCANS[0] if _SCANS else None
    if scan is None or not scan.calls:
        return map(id, namespace.values())
    kept = scan.objects.get(module_name)
    if kept is not None and kept[0] is namespace and kept[1] == len(namespace):
        return kept[2]
    objects = frozenset(map(id, namespace.values()))
    scan.objects[module_name] = (namespace, len(namespace), objects)
    return objects


@dataclass
class _Scan:
    """One scan's state: how many times the candidates were looked for, and per module
    (its namespace, that namespace's size then, the ids of its objects)."""

    calls: int = 0
    objects: dict[str, tuple[Mapping[str, object], int, frozenset[int]]] = field(
        default_factory=dict
    )


class _Missing:
    """A name a namespace does not bind."""


_MISSING = _Missing()
_SOURCES: dict[str, tuple[tuple[int, int], _Source]] = {}
"""File name -> ((mtime_ns, size), its imports): read once per version of a file."""
_SCANS: list[_Scan] = []
"""The scan one_scan() opened (at most one)."""

"""What a landed revert cannot reach in this process, said: held copies, a module's 2nd name.

Copies of a function a revert replaced, held by a `functools.partial` or a default
argument in a loaded module of its package; a reverted module that `sys.modules` also
holds under another name (the same file, another module object).
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from types import FunctionType, ModuleType

from prtoggle.errors import PartialRevertWarning

ATOMS = (int, str, bytes, bool, type(None), float)
"""Values a copy of is no revert's concern (equal values are common)."""


def say_unreached(notes: Sequence[str], *, pr: int) -> None:
    """One PartialRevertWarning per note, where partial reverts are said at run time."""
    for note in notes:
        warnings.warn(
            f"PR {pr} reverted in part in this process: {note}", PartialRevertWarning, stacklevel=2
        )


def held_copies(changes: Sequence[tuple[str, dict[str, object]]]) -> list[str]:
    """Where the loaded modules of each scope's package still hold an object the revert
    replaced or removed in that scope (`changes`: (scope, name -> post-fix object)): a
    module-level or class-level `functools.partial` of it, or a default argument of a
    function. One pass over each package's modules for every scope of it."""
    wanted: dict[str, dict[int, list[tuple[str, str]]]] = {}  # top -> id -> (scope, name)
    values: dict[tuple[str, str], object] = {}
    for scope, replaced in changes:
        for name, value in replaced.items():
            if not isinstance(value, ATOMS):
                package = wanted.setdefault(scope.split(".", 1)[0], {})
                package.setdefault(id(value), []).append((scope, name))
                values[(scope, name)] = value
    notes: list[str] = []
    for top, by_id in wanted.items():
        for module_name, module in list(sys.modules.items()):
            if module_name != top and not module_name.startswith(f"{top}."):
                continue
            for where, holder in _members(module_name, module):
                notes += _holding_notes(where, holder, by_id, values)
    return notes


def other_names(modules: Sequence[ModuleType]) -> list[str]:
    """Each of `modules` imported under other names too: the same file, other module
    objects in sys.modules (a revert changes the one it is given only). One pass over
    sys.modules for them all."""
    paths = {id(module): _real_file(module) for module in modules}
    bases = {os.path.basename(path) for path in paths.values() if path is not None}
    by_base: dict[str, list[tuple[str, object]]] = {}
    for name, other in list(sys.modules.items()):
        base = os.path.basename(str(getattr(other, "__file__", None) or ""))
        if other is not None and base in bases:
            by_base.setdefault(base, []).append((name, other))
    notes = []
    for module in modules:
        path = paths[id(module)]
        if path is None:
            continue
        found = [
            name
            for name, other in by_base.get(os.path.basename(path), [])
            if other is not module and _real_file(other) == path
        ]
        if found:
            notes.append(
                f"module {module.__name__} is also imported as {', '.join(sorted(found))} (the "
                f"same file, another module object): the revert changes {module.__name__} only"
            )
    return notes


def _members(module_name: str, module: object) -> Iterator[tuple[str, object]]:
    """(dotted name, value) of a module's top-level values and of its classes' members."""
    try:
        namespace = dict(vars(module))
    except TypeError:
        return
    for attribute, value in namespace.items():
        yield f"{module_name}.{attribute}", value
        if isinstance(value, type) and value.__module__ == module_name:
            for member, inner in list(vars(value).items()):
                function = getattr(inner, "__func__", inner)  # staticmethod, classmethod
                yield f"{module_name}.{attribute}.{member}", function


def _holding_notes(
    where: str,
    holder: object,
    by_id: dict[int, list[tuple[str, str]]],
    values: dict[tuple[str, str], object],
) -> list[str]:
    notes = [
        f"{where}, a functools.partial, holds the post-fix {scope}.{name} "
        f"(the revert rebinds {scope}.{name} only)"
        for scope, name in _partial_of(holder, by_id, values)
    ]
    for scope, name in _defaults_holding(holder, by_id, values):
        notes.append(f"a default argument of {where} holds the post-fix {scope}.{name}")
    return notes


def _partial_of(
    value: object, by_id: dict[int, list[tuple[str, str]]], values: dict[tuple[str, str], object]
) -> list[tuple[str, str]]:
    if not isinstance(value, functools.partial):
        return []
    return [key for key in by_id.get(id(value.func), ()) if values[key] is value.func]


def _defaults_holding(
    value: object, by_id: dict[int, list[tuple[str, str]]], values: dict[tuple[str, str], object]
) -> Iterator[tuple[str, str]]:
    if not isinstance(value, FunctionType):
        return
    defaults = [*(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values()]
    for default in defaults:
        for key in by_id.get(id(default), ()):
            if values[key] is default:
                yield key


def _real_file(module: object) -> str | None:
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not path:
        return None
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return None

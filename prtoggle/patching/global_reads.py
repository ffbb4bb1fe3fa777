"""The global check: every global a function reads must resolve, so no revert ends in NameError."""

from __future__ import annotations

import builtins
import dis
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from types import CodeType, FunctionType

from prtoggle.errors import PatchApplicationError

_GLOBAL_STORES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})


def global_reads(code: CodeType) -> frozenset[str]:
    """The names `code` (and the code nested in it) reads from its globals or builtins.

    `LOAD_GLOBAL` everywhere; `LOAD_NAME` (class bodies, module code) except names that
    same body binds (`__annotations__` too, where the body sets it up). A name some part
    of the code assigns with `global NAME` is left out: the function creates it itself.
    """
    reads: set[str] = set()
    stored: set[str] = set()
    pending = [code]
    while pending:
        current = pending.pop()
        local: set[str] = set()
        loaded: set[str] = set()
        for instruction in dis.get_instructions(current):
            name = instruction.argval
            if instruction.opname == "LOAD_GLOBAL":
                reads.add(name)
            elif instruction.opname == "LOAD_NAME":
                loaded.add(name)
            elif instruction.opname == "STORE_NAME":
                local.add(name)
            elif instruction.opname in _GLOBAL_STORES:
                stored.add(name)
            elif instruction.opname == "SETUP_ANNOTATIONS":
                local.add("__annotations__")  # made by the body itself
        reads.update(loaded - local)
        pending.extend(const for const in current.co_consts if isinstance(const, CodeType))
    return frozenset(reads - stored)


def missing_globals(function: FunctionType, *, excused: Collection[str] = ()) -> tuple[str, ...]:
    """The globals `function` reads that neither its module nor the builtins define now.

    `excused`: names not counted (the module binds them under a condition not met here, or
    the code before the revert read them too: a NameError the revert does not add).
    """
    namespace = function.__globals__
    known = _builtin_names(getattr(function, "__builtins__", None))
    reads = global_reads(function.__code__) - frozenset(excused)
    return tuple(sorted(name for name in reads if name not in namespace and name not in known))


def missing_in(code: CodeType, *, names: Collection[str]) -> tuple[str, ...]:
    """The globals `code` reads that are neither in `names` nor builtins (static check)."""
    return tuple(
        sorted(name for name in global_reads(code) if name not in names and name not in _BUILTINS)
    )


def unresolved_read(what: str, name: str, module: str) -> str:
    """The one sentence `check` and the runtime give for a read that would fail with
    NameError: `what` (a target, or `define of SCOPE`) reads `name`, absent from `module`."""
    return f"{what} reads `{name}`, not defined in module {module} after the revert (nor a builtin)"


@dataclass(frozen=True)
class PlannedCode:
    """A function as a revert will leave it: its code, and the names its module will bind.

    `excused`: names not counted (the module binds them under a condition not met here, or
    the code before the revert read them too: a NameError the revert does not add).
    """

    what: str
    code: CodeType
    module: str
    names: Collection[str]
    builtins: object = None
    excused: Collection[str] = ()


def refuse_unresolved(functions: Iterable[PlannedCode], *, label: str) -> None:
    """Raise naming the first function that would read a global defined nowhere."""
    for planned in functions:
        known = _builtin_names(planned.builtins)
        reads = global_reads(planned.code) - frozenset(planned.excused)
        missing = sorted(n for n in reads if n not in planned.names and n not in known)
        if missing:
            raise PatchApplicationError(
                f"{label}: {unresolved_read(planned.what, missing[0], planned.module)}, so the "
                "reverted code would fail with NameError; the recipe must define it (names: "
                "define) or list the change in not_reverted"
            )


def _builtin_names(found: object) -> Mapping[str, object]:
    if isinstance(found, dict):
        return found
    return vars(found) if found is not None else _BUILTINS


_BUILTINS: Mapping[str, object] = vars(builtins)

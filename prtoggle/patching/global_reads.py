"""The global check: every global a function reads must resolve, so no revert ends in NameError."""

from __future__ import annotations

import builtins
import dis
import functools
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import CodeType, FunctionType

from prtoggle.errors import PatchApplicationError

_LOAD_GLOBAL, _LOAD_NAME, _STORE_NAME = (
    dis.opmap[n] for n in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_NAME")
)
_GLOBAL_STORES = frozenset({dis.opmap["STORE_GLOBAL"], dis.opmap["DELETE_GLOBAL"]})
_WANTED = frozenset(
    {_LOAD_GLOBAL, _LOAD_NAME, _STORE_NAME, *_GLOBAL_STORES, dis.opmap["SETUP_ANNOTATIONS"]}
)
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]


@functools.lru_cache(maxsize=4096)
def global_reads(code: CodeType) -> frozenset[str]:
    """The names `code` (and the code nested in it) reads from its globals or builtins.

    `LOAD_GLOBAL` everywhere; `LOAD_NAME` (class bodies, module code) except names that
    same body binds (`__annotations__` too, where the body sets it up). A name some part
    of the code assigns with `global NAME` is left out: the function creates it itself.
    Read once per code (equal code objects read the same names): checks and drafts read
    the same functions again and again.
    """
    reads: set[str] = set()
    stored: set[str] = set()
    pending = [code]
    while pending:
        current = pending.pop()
        local: set[str] = set()
        loaded: set[str] = set()
        names = current.co_names
        for op, arg in _name_instructions(current.co_code):
            if op == _LOAD_GLOBAL:
                reads.add(names[arg >> 1])  # its low bit says whether NULL is pushed too
            elif op == _LOAD_NAME:
                loaded.add(names[arg])
            elif op == _STORE_NAME:
                local.add(names[arg])
            elif op in _GLOBAL_STORES:
                stored.add(names[arg])
            else:
                local.add("__annotations__")  # SETUP_ANNOTATIONS: made by the body itself
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


def _name_instructions(raw: bytes) -> Iterator[tuple[int, int]]:
    """(opcode, argument) of the instructions of `raw` (a code's co_code: two bytes each,
    EXTENDED_ARG prefixes folded in) that global_reads looks at; what dis.get_instructions
    says of them, without building an Instruction for every one."""
    extended = 0
    for index in range(0, len(raw), 2):
        op = raw[index]
        if op == _EXTENDED_ARG:
            extended = (extended | raw[index + 1]) << 8
            continue
        if op in _WANTED:
            yield op, extended | raw[index + 1]
        extended = 0

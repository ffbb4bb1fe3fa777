"""The variables of a nested function's enclosing functions, and edits that would read them."""

from __future__ import annotations

import dis
import functools
import symtable
from types import CodeType

from prtoggle.errors import UnsupportedTargetError

MODULE_TABLE_CACHE_SIZE = 128


def enclosing_variables(
    file_text: str, *, qualname: str, filename: str
) -> tuple[tuple[str, str], ...]:
    """(name, enclosing function) for every variable an enclosing function of `qualname` binds.

    Found with `symtable` on the module's source, following `qualname` (`outer.<locals>.f`,
    `outer.<locals>.C.m`); class bodies are skipped, as Python skips them for closures.
    Empty for a function that no function encloses, or when the source does not parse.
    The module's table is built once per file text (the last few files are kept).
    """
    parts = [part for part in qualname.split(".") if part != "<locals>"]
    if len(parts) < 2:
        return ()
    table = module_table(file_text, filename)
    if table is None:
        return ()
    found: dict[str, str] = {}
    for part in parts[:-1]:
        children = [child for child in table.get_children() if child.get_name() == part]
        if not children:
            return tuple(found.items())
        table = children[-1]
        if table.get_type() == "function":
            for symbol in table.get_symbols():
                if symbol.is_local() and not symbol.is_global():
                    found[symbol.get_name()] = table.get_name()
    return tuple(found.items())


def refuse_new_enclosing_reads(
    code: CodeType,
    *,
    enclosing: tuple[tuple[str, str], ...],
    freevars: tuple[str, ...] | None,
    target: str,
) -> None:
    """Raise when the compiled code reads, as a global, a variable of an enclosing function.

    The original function closes only over the variables it used; a code swap cannot
    give it another closure cell, so such a read would silently reach a module global
    of the same name (or raise NameError when called).
    """
    if not enclosing:
        return
    owners = dict(enclosing)
    wanted = sorted(name for name in _global_reads(code) if name in owners)
    if not wanted:
        return
    name = wanted[0]
    closes = ", ".join(v for v in freevars or () if v != "__class__") or "no variable"
    raise UnsupportedTargetError(
        f"{target}: the edited code reads {', '.join(wanted)}, a variable of the enclosing "
        f"function {owners[name]}() that the original does not use; a code swap cannot add "
        f"a closure cell (the function closes over {closes}), so the edit would read a "
        "module global of that name instead; edit the enclosing function, or use only the "
        "variables the original already uses"
    )


@functools.lru_cache(maxsize=MODULE_TABLE_CACHE_SIZE)
def module_table(file_text: str, filename: str) -> symtable.SymbolTable | None:
    """The symbol table of a module's text (None: it does not parse); the last
    MODULE_TABLE_CACHE_SIZE kept (prepared_sources fills them ahead)."""
    try:
        return symtable.symtable(file_text, filename, "exec")
    except (SyntaxError, ValueError):
        return None


def _global_reads(code: CodeType) -> set[str]:
    names = {
        str(instruction.argval)
        for instruction in dis.get_instructions(code)
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            names |= _global_reads(constant)
    return names

"""Refuse to patch a function whose source file changed after its code was loaded."""

from __future__ import annotations

import functools
import sys
from types import CodeType, FunctionType

from prtoggle.errors import PatchApplicationError

COMPILED_FILE_CACHE_SIZE = 128


def refuse_stale_source(function: FunctionType, *, filename: str, text: str, target: str) -> None:
    """Raise unless the function's loaded code is what `text` (its file now) compiles to.

    The whole file is compiled as an import compiles it (so bytecode choices that depend
    on module context, such as 3.11's LOAD_METHOD for imported names, agree) and the
    code object with the loaded code's qualified name and first line must equal it
    (bytecode, constants, names, line table). Editing the file after the import, even
    only above the function, shifts or changes that code: patching from the new text
    would mix code that never ran with the running code.
    """
    loaded = function.__code__
    compiled = compiled_file(filename, text)
    found = _find_code(compiled, loaded) if compiled is not None else None
    if found is not None and found == loaded:
        return
    where = f"{loaded.co_qualname} at line {loaded.co_firstlineno}"
    if compiled is None:
        now = "it no longer compiles"
    elif found is None:
        now = f"it has no {where} any more"
    else:
        now = f"its {where} is not the code running now"
    module = function.__module__ or "its module"
    raise PatchApplicationError(
        f"{target}: {filename} changed after {module} was loaded ({now}); a revert edited "
        "from the file would mix code that never ran with the running code; restart the "
        f"program (or re-import {module}) first"
    )


@functools.lru_cache(maxsize=COMPILED_FILE_CACHE_SIZE)
def compiled_file(filename: str, text: str) -> CodeType | None:
    """`text` (the file `filename` now) compiled as an import compiles it (None: it does not
    compile); the last COMPILED_FILE_CACHE_SIZE kept (prepared_sources fills them ahead)."""
    try:
        return compile(text, filename, "exec", dont_inherit=True, optimize=sys.flags.optimize)
    except (SyntaxError, ValueError):
        return None


def _find_code(module_code: CodeType, loaded: CodeType) -> CodeType | None:
    pending = [module_code]
    while pending:
        code = pending.pop()
        if code.co_qualname == loaded.co_qualname and code.co_firstlineno == loaded.co_firstlineno:
            return code
        pending.extend(const for const in code.co_consts if isinstance(const, CodeType))
    return None

"""Source editing of Python functions: match, edit, compile, swap __code__."""

from __future__ import annotations

from prtoggle.patching.compiler import FunctionShape, compile_function
from prtoggle.patching.definition import DefinitionValues
from prtoggle.patching.editor import (
    EditContext,
    NumberedSource,
    SourceLine,
    edit_numbered,
    edit_text,
    insert_preamble,
    number_lines,
)
from prtoggle.patching.swap import (
    CodeSwapper,
    EditLayer,
    Replacement,
    apply_layers,
    build_replacement,
)
from prtoggle.patching.targets import (
    FunctionSource,
    PendingTarget,
    ResolvedTarget,
    function_source,
    import_target,
    resolve_loaded,
)
from prtoggle.patching.types import Edit, EditKind, Patch

__all__ = [
    "CodeSwapper",
    "DefinitionValues",
    "Edit",
    "EditContext",
    "EditKind",
    "EditLayer",
    "FunctionShape",
    "FunctionSource",
    "NumberedSource",
    "Patch",
    "PendingTarget",
    "Replacement",
    "ResolvedTarget",
    "SourceLine",
    "apply_layers",
    "build_replacement",
    "compile_function",
    "edit_numbered",
    "edit_text",
    "function_source",
    "import_target",
    "insert_preamble",
    "number_lines",
    "resolve_loaded",
]

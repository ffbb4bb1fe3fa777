"""Source editing of Python functions: match, edit, compile, swap __code__."""

from __future__ import annotations

from prtoggle.patching.compiler import FunctionShape, compile_function
from prtoggle.patching.editor import EditContext, EditedSource, SourceLine, edit_source
from prtoggle.patching.swap import CodeSwapper, EditLayer, build_code, edited_source
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
    "Edit",
    "EditContext",
    "EditKind",
    "EditLayer",
    "EditedSource",
    "FunctionShape",
    "FunctionSource",
    "Patch",
    "PendingTarget",
    "ResolvedTarget",
    "SourceLine",
    "build_code",
    "compile_function",
    "edit_source",
    "edited_source",
    "function_source",
    "import_target",
    "resolve_loaded",
]

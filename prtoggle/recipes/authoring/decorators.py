"""Which decorators a drafted recipe may run again (`define`), or drop with their function."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from prtoggle.recipes.authoring.statements import decorator_name

REAPPLIED = frozenset(
    {
        "staticmethod",
        "classmethod",
        "property",
        "abstractmethod",
        "abc.abstractmethod",
        "functools.wraps",
        "wraps",
        "functools.lru_cache",
        "lru_cache",
        "functools.cache",
        "cache",
        "functools.cached_property",
        "cached_property",
        "contextlib.contextmanager",
        "contextmanager",
        "contextlib.asynccontextmanager",
        "asynccontextmanager",
        "torch.no_grad",
        "torch.inference_mode",
        "torch.enable_grad",
        "overload",
        "typing.overload",
        "override",
        "typing.override",
        "typing_extensions.override",
        "final",
        "typing.final",
    }
)
"""Decorators that only wrap the function they get (no registration, no compilation):
running them again on the pre-fix def gives what the module had before the fix."""

ACCESSOR_PARTS = frozenset({"setter", "getter", "deleter"})
"""`@name.setter` and kin: they build a property from one defined in the same scope."""

CLASS_REAPPLIED = frozenset({"dataclass", "dataclasses.dataclass", "functools.total_ordering"})
"""Decorators of a class defined back whole: it is made anew, its fields with it."""

DROPPED = frozenset(
    {"torch.compile", "torch.jit.script", "triton.jit", "triton.autotune", "triton.heuristics"}
)
"""Decorators that compile lazily or wrap without registering anything at import: a
function the fix added with them can be removed (it is not re-applied: `define` of a def
under them is not sound, e.g. `torch.compile`'s caches)."""


OP_REGISTRATIONS = frozenset(
    {"register_custom_op", "torch.library.custom_op", "custom_op", "direct_register_custom_op"}
)
"""Torch custom-op registrations: the op a function the fix added registered stays under
`torch.ops` by its new name, which no pre-fix code names, so removing the function is
whole; defining a def under them again is not sound (an op registered twice)."""


KERNEL_OBJECTS = frozenset(
    {
        "triton.jit",
        "jit",
        "triton.autotune",
        "autotune",
        "triton.heuristics",
        "heuristics",
        "torch.jit.script",
        "numba.jit",
        "numba.njit",
        "njit",
    }
)
"""Decorators that turn a def into a kernel object (a triton JITFunction or Autotuner, a
TorchScript or numba function), not a Python function: the runtime refuses a code swap
of it, so a change inside one is listed, never patched."""


def kernel_object(decorators: Sequence[ast.expr]) -> str | None:
    """The first decorator that makes the def a kernel object (`@triton.jit`), if any."""
    for node in decorators:
        name = decorator_name(node)
        if name in KERNEL_OBJECTS:
            return f"@{name}"
    return None


TRITON_REAPPLIED = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})
"""Kernel decorators a `define` of the whole pre-fix def re-applies soundly: each makes a
new kernel object that compiles the pre-fix source on its first call (a fresh cache);
callers find it by name (other modules' copies are followed) when they compile."""


def reapplied(
    decorators: Sequence[ast.expr], *, whole_class: bool = False, kernels: bool = False
) -> str | None:
    """None when every decorator is re-applied soundly by a `define`; else the first that
    is not (`@name`). `kernels`: triton's kernel decorators count as re-applied."""
    allowed = REAPPLIED | CLASS_REAPPLIED if whole_class else REAPPLIED
    allowed = allowed | TRITON_REAPPLIED if kernels else allowed
    for node in decorators:
        name = decorator_name(node)
        if name in allowed or (name.rsplit(".", 1)[-1] in ACCESSOR_PARTS and "." in name):
            continue
        return f"@{name or ast.unparse(node)}"
    return None


def droppable(decorators: Sequence[ast.expr]) -> str | None:
    """None when a def under these decorators can be removed with nothing left behind
    (no import-time registration); else the first decorator that may have registered it."""
    for node in decorators:
        name = decorator_name(node)
        last = name.rsplit(".", 1)[-1]
        if reapplied([node], whole_class=True) is None or name in DROPPED:
            continue
        if name in OP_REGISTRATIONS or last in OP_REGISTRATIONS:
            continue
        return f"@{name or ast.unparse(node)}"
    return None

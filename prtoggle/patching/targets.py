"""Resolve dotted patch targets to live functions (or to a module still to be imported)."""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import inspect
import linecache
import logging
import sys
import types
import weakref
from dataclasses import dataclass
from typing import Any

from prtoggle.errors import TargetResolutionError, UnsupportedTargetError
from prtoggle.patching.compiler import FUTURE_FLAGS_MASK, FunctionShape
from prtoggle.patching.enclosing import enclosing_variables
from prtoggle.patching.freshness import refuse_stale_source
from prtoggle.patching.module_scope import imported_in

logger = logging.getLogger(__name__)

MAX_LISTED_NAMES = 12

_CACHES: weakref.WeakKeyDictionary[types.FunctionType, tuple[Any, ...]] = (
    weakref.WeakKeyDictionary()
)
"""The memo-cache wrappers (lru_cache, cache) of every resolved target, by function."""

OPERATOR_DECORATORS = ("custom_op", "triton_op")
"""torch.library decorators that turn a def into a CustomOpDef, an operator object."""

_C_CALLABLES = (
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.ClassMethodDescriptorType,
)


@dataclass(frozen=True)
class FunctionSource:
    """The source text of one function definition and where it lives in its file.

    `text` is what `inspect.getsource` gives (decorators included). `module_names`, for
    sources read without importing, are the names the module binds at its top level.
    `found_as` is the dotted name the definition has where it is defined, when the target
    names it elsewhere (a re-export: `from pkg.new import f` in the target's module).
    """

    filename: str
    first_line: int
    text: str
    shape: FunctionShape
    module_names: frozenset[str] | None = None
    found_as: str | None = None


@dataclass(frozen=True)
class ResolvedTarget:
    """A target resolved to the Python function whose `__code__` gets swapped."""

    target: str
    function: types.FunctionType


@dataclass(frozen=True)
class PendingTarget:
    """A target whose module `module` is not imported yet."""

    target: str
    module: str


def resolve_loaded(target: str) -> ResolvedTarget | PendingTarget:
    """Resolve `target` using imported modules only; never imports anything.

    The longest imported module prefix is walked attribute by attribute. A missing
    attribute that names a submodule not imported yet, or a target none of whose
    prefixes is imported, gives a PendingTarget for the module to wait for.
    """
    parts = target.split(".")
    for index in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:index]))
        if module is None:
            continue
        next_name = ".".join(parts[: index + 1])
        if not hasattr(module, parts[index]) and _module_exists(next_name):
            return PendingTarget(target=target, module=next_name)
        return ResolvedTarget(target=target, function=_walk(module, parts[index:], target))
    if not _module_exists(parts[0]):
        raise TargetResolutionError(
            f"{target}: no module named {parts[0]!r} is importable; expected a dotted path "
            "module[.Class].function"
        )
    return PendingTarget(target=target, module=parts[0])


def import_target(target: str) -> ResolvedTarget:
    """Resolve `target`, importing its module (longest importable prefix) if needed."""
    parts = target.split(".")
    for index in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:index])
        if not _importable(name):
            continue
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise TargetResolutionError(
                f"{target}: importing module {name} failed: {type(exc).__name__}: {exc}"
            ) from exc
        return ResolvedTarget(target=target, function=_walk(module, parts[index:], target))
    raise TargetResolutionError(
        f"{target}: no prefix of it is an importable module; expected a dotted path "
        "module[.Class].function"
    )


def function_source(function: types.FunctionType, *, target: str) -> FunctionSource:
    """The source of a live function as its file has it (decorators included).

    Refused when the file no longer holds the code that is running (see freshness).
    """
    code = function.__code__
    try:
        lines, first_line = inspect.getsourcelines(function)
        filename = inspect.getsourcefile(function) or code.co_filename
    except (OSError, TypeError) as exc:
        raise UnsupportedTargetError(
            f"{target}: the source of {function.__qualname__} is unavailable ({exc}); only "
            "functions defined in a Python source file can be patched"
        ) from exc
    file_text = "".join(linecache.getlines(filename, function.__globals__))
    refuse_stale_source(function, filename=filename, text=file_text, target=target)
    qualparts = function.__qualname__.split(".")
    class_name = qualparts[-2] if len(qualparts) > 1 and qualparts[-2] != "<locals>" else None
    shape = FunctionShape(
        name=code.co_name,
        class_name=class_name,
        freevars=code.co_freevars,
        future_flags=code.co_flags & FUTURE_FLAGS_MASK,
        qualname=code.co_qualname,
        enclosing=enclosing_variables(file_text, qualname=code.co_qualname, filename=filename),
        imported=imported_in(function.__module__, filename),
    )
    defined_as = f"{function.__module__}.{code.co_qualname}"
    return FunctionSource(
        filename=code.co_filename,
        first_line=max(first_line, 1),
        text="".join(lines),
        shape=shape,
        found_as=defined_as if defined_as != target and "<locals>" not in defined_as else None,
    )


def custom_op_refusal(target: str) -> UnsupportedTargetError:
    """The refusal of a target that is a torch custom op, statically and at run time alike."""
    return UnsupportedTargetError(
        f"{target}: is a torch custom op (a CustomOpDef, made by @torch.library.custom_op or "
        "@torch.library.triton_op), not a function; "
        "torch calls the implementation registered for the op, which a revert cannot swap; "
        "patch a plain function that the op calls instead"
    )


def module_exists(name: str) -> bool:
    """Whether module `name` can be found, never importing (its parent must be imported)."""
    return _module_exists(name)


def clear_caches(function: types.FunctionType) -> None:
    """Empty every memo cache (functools.lru_cache, cache) found wrapping `function`.

    Called whenever its code is swapped (revert applied or restored), so a cache never
    serves a value computed on the other side of a revert boundary.
    """
    for wrapper in _CACHES.get(function, ()):
        wrapper.cache_clear()


def _walk(root: object, names: list[str], target: str) -> types.FunctionType:
    current = root
    for depth, name in enumerate(names):
        try:
            if isinstance(current, type):
                current = inspect.getattr_static(current, name)
            else:
                current = getattr(current, name)
        except AttributeError as exc:
            holder = target.rsplit(".", len(names) - depth)[0]
            raise TargetResolutionError(
                f"{target}: {holder} has no attribute {name!r}; {_known_names(current, name)}"
            ) from exc
    return _as_function(current, target)


def _as_function(obj: object, target: str) -> types.FunctionType:
    """Unwrap descriptors and functools.wraps wrappers down to the Python function."""
    if isinstance(obj, staticmethod | classmethod):
        obj = obj.__func__
    elif isinstance(obj, property):
        if obj.fget is None:
            raise UnsupportedTargetError(f"{target}: is a property without a getter")
        obj = obj.fget
    elif isinstance(obj, functools.cached_property):
        raise UnsupportedTargetError(
            f"{target}: is a functools.cached_property; the values it computed stay in each "
            "instance's __dict__, where a revert can neither clear nor restore them, so "
            "instances would mix fixed and reverted values; patch the function it calls"
        )
    elif isinstance(obj, types.MethodType):
        obj = obj.__func__
    if callable(obj) and hasattr(obj, "__wrapped__"):
        caches = _memo_caches(obj)
        unwrapped = inspect.unwrap(obj)
        if caches and isinstance(unwrapped, types.FunctionType):
            _CACHES[unwrapped] = caches
        logger.debug("%s: patching %r, the function its wrapper wraps", target, unwrapped)
        obj = unwrapped
    if isinstance(obj, types.FunctionType):
        if obj.__name__ == "<lambda>":
            raise UnsupportedTargetError(
                f"{target}: is a lambda; only functions defined with def can be patched"
            )
        return obj
    if type(obj).__name__ == "CustomOpDef":
        raise custom_op_refusal(target)
    if isinstance(obj, _C_CALLABLES):
        raise UnsupportedTargetError(
            f"{target}: is a {type(obj).__name__} implemented in C, not a Python function; "
            "only functions defined in Python source can be patched"
        )
    kind = "a class" if isinstance(obj, type) else f"a {type(obj).__name__}"
    raise UnsupportedTargetError(
        f"{target}: is {kind}, not a function; expected a function, method, staticmethod, "
        "classmethod or property"
    )


def _memo_caches(wrapper: object) -> tuple[Any, ...]:
    """The layers of a wrapper chain that hold a memo cache (have `cache_clear`)."""
    found = []
    current: Any = wrapper
    while current is not None:
        if callable(getattr(current, "cache_clear", None)):
            found.append(current)
        current = getattr(current, "__wrapped__", None)
    return tuple(found)


def _known_names(holder: object, wanted: str) -> str:
    names = sorted(n for n in dir(holder) if not (n.startswith("__") and n.endswith("__")))
    close = difflib.get_close_matches(wanted, names, n=3)
    if close:
        return f"closest names: {', '.join(close)}"
    shown = ", ".join(names[:MAX_LISTED_NAMES]) + (", ..." if len(names) > MAX_LISTED_NAMES else "")
    return f"it has: {shown or '(nothing)'}"


def _module_exists(name: str) -> bool:
    """Whether `name` can be found, asking the meta-path finders directly.

    Never imports (not even the parent: importlib.util.find_spec would, and waiting for
    a parent another thread is still importing could deadlock against the toggle lock).
    The parent of a dotted name must already be imported.
    """
    if name in sys.modules:
        return True
    parent_name, _, _ = name.rpartition(".")
    path = None
    if parent_name:
        path = getattr(sys.modules.get(parent_name), "__path__", None)
        if path is None:
            return False
    for finder in list(sys.meta_path):
        find_spec = getattr(finder, "find_spec", None)
        try:
            if find_spec is not None and find_spec(name, path) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def _importable(name: str) -> bool:
    """Whether `name` can be found; imports its parent packages (check time only).

    False when `name` or a parent does not exist (or a parent is a module, not a package);
    a parent package whose own import fails (a missing dependency, an error in its code)
    is a TargetResolutionError naming the cause, never "not found".
    """
    try:
        return name in sys.modules or importlib.util.find_spec(name) is not None
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(f"{exc.name}.")):
            return False
        raise TargetResolutionError(
            f"{name}: importing its parent packages failed: {type(exc).__name__}: {exc}"
        ) from exc
    except ValueError:
        return False
    except Exception as exc:
        raise TargetResolutionError(
            f"{name}: importing its parent packages failed: {type(exc).__name__}: {exc}"
        ) from exc

"""detect.instrument_functions(): NaN probes on what every function of some modules produces.

For engines whose stack is not (only) torch.nn.Modules (attention backends, graph runners,
kernel wrappers are plain classes and functions, in sglang as in fixes/):

    with detect.instrument_functions(["fixes.attention.trtllm_mha_backend", "fixes.kernels"]):
        run_the_engine()
    detect.check()   # first writer first: nan at fixes.kernels.trtllm_fmha.decode(return)

Every plain function defined in the named modules (packages: every submodule already
imported), and every plain method of the classes defined there, is replaced by a wrapper
that, after the call, probes the float tensors it returned (`QUALNAME(return)`) and the
float tensors it was passed and changed in place (`QUALNAME(ARG)`: torch's version counter
moved during the call; a buffer written by a raw Triton launch does not move it, and an
output buffer it only passed along, or a poisoned buffer not written since it was poisoned
(e.g. a graph runner's freshly allocated buffers), is not probed, so unwritten poison is no
false hit). Probing goes
through record_float_tensors(), gated by nan_detection_enabled(), one launch per call.
An exception leaving a wrapped function gets a note per instrumented function it passes
through and, unless it already names a site, `exc.site` = the innermost one (where a
crash, e.g. a bounds check of a kernel, happened). remove() (or leaving the `with` block)
puts every original back. Reverts of fixes swap the
`__code__` of the original functions: apply them before instrumenting, restore them after.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import FunctionType, ModuleType
from typing import Any

from prtoggle.detect import config
from prtoggle.detect.instrumentation.modules import named_tensors
from prtoggle.detect.probes import site_probes
from prtoggle.detect.redzones import buffers
from prtoggle.errors import DetectUsageError


@dataclass
class FunctionInstrumentation:
    """The wrapped functions (owner, attribute, original); a context manager."""

    wrapped: list[tuple[object, str, Callable[..., Any]]] = field(default_factory=list)

    @property
    def sites(self) -> tuple[str, ...]:
        """The qualified names of the wrapped functions."""
        return tuple(_qualname(original) for _, _, original in self.wrapped)

    def remove(self) -> None:
        """Put every original function back (idempotent)."""
        for owner, attribute, original in reversed(self.wrapped):
            setattr(owner, attribute, original)
        self.wrapped.clear()

    def __enter__(self) -> FunctionInstrumentation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


def instrument_functions(
    modules: Sequence[str | ModuleType], *, exclude: Sequence[str] = ()
) -> FunctionInstrumentation:
    """Wrap every function and method defined in `modules` (and loaded submodules).

    `exclude`: `module.Class.function` names (fnmatch patterns) left unwrapped, e.g. helpers
    that hand a kernel freshly allocated, uninitialised output memory: what they return is
    not written yet, so probing it would report whatever the allocator left there.
    """
    handle = FunctionInstrumentation()
    for module in _expand(modules):
        for owner, attribute, function in _functions_of(module):
            if any(fnmatch.fnmatchcase(_qualname(function), pattern) for pattern in exclude):
                continue
            setattr(owner, attribute, _probing(function))
            handle.wrapped.append((owner, attribute, function))
    return handle


def _probing(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, probing its returned and passed float tensors after each call."""
    site = _qualname(function)
    names = list(inspect.signature(function).parameters)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        passed = [
            (f"{site}({names[i] if i < len(names) else i})", value) for i, value in enumerate(args)
        ] + [(f"{site}({key})", value) for key, value in kwargs.items()]
        before = [
            (name, tensor, tensor._version)
            for argument, value in passed
            for name, tensor in named_tensors(argument, value)
        ]
        try:
            result = function(*args, **kwargs)
        except Exception as exc:
            _name_crash(exc, site)
            raise
        if config.nan_detection_enabled():
            # A returned tensor that is, or views, an argument this call did not write was
            # handed back (e.g. `out[:rows]` bundled for a kernel): not this call's output.
            unchanged = {_storage(t) for _, t, version in before if t._version == version}
            unchanged |= buffers.unwritten_poison_storages()  # deliberate poison, no result
            found = [
                (name, t)
                for name, t in named_tensors(f"{site}(return)", result)
                if _storage(t) not in unchanged
            ]
            found.extend((name, t) for name, t, version in before if t._version != version)
            site_probes.record_float_tensors(found)
        return result

    return wrapper


def _storage(tensor: Any) -> int:
    """The address of the memory `tensor` views (shared by a tensor and all its views)."""
    return int(tensor.untyped_storage().data_ptr())


def _name_crash(exc: Exception, site: str) -> None:
    """Note on `exc` each instrumented function it leaves; `exc.site` is the innermost one."""
    if getattr(exc, "site", None) is None and not getattr(exc, "sites", None):
        with contextlib.suppress(AttributeError):  # __slots__ exceptions keep the note only
            exc.site = site  # type: ignore[attr-defined]
    exc.add_note(f"raised through instrumented {site}")


def _expand(modules: Sequence[str | ModuleType]) -> Iterator[ModuleType]:
    """The modules named, each followed by its already-imported submodules (once each)."""
    seen: set[str] = set()
    for entry in modules:
        name = entry if isinstance(entry, str) else entry.__name__
        if name not in sys.modules:
            raise DetectUsageError(
                f"instrument_functions(): module {name!r} is not imported; import it first "
                f"(only loaded modules are instrumented)"
            )
        for loaded in sorted(sys.modules):
            if (loaded == name or loaded.startswith(name + ".")) and loaded not in seen:
                seen.add(loaded)
                yield sys.modules[loaded]


def _functions_of(module: ModuleType) -> Iterator[tuple[object, str, FunctionType]]:
    """(owner, attribute, function) for plain functions and methods defined in `module`."""
    for attribute, value in list(vars(module).items()):
        if isinstance(value, FunctionType) and value.__module__ == module.__name__:
            yield module, attribute, value
        elif isinstance(value, type) and value.__module__ == module.__name__:
            for method_name, method in list(vars(value).items()):
                if isinstance(method, FunctionType) and not method_name.startswith("__"):
                    yield value, method_name, method


def _qualname(function: Callable[..., Any]) -> str:
    """`module.Class.method` of a function."""
    return f"{function.__module__}.{function.__qualname__}"

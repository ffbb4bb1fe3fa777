"""Import-time stand-ins for GPU-only packages that sglang's modules import for names.

`whole_fix_imports.py realfixes --trees` imports sglang's modules on a CPU machine.
Some of them import, at module import, packages that only install or load beside a
GPU (`cuda` of cuda-python, NVIDIA's `cutlass` DSL, Ascend's `sgl_kernel_npu`, ...)
and use them only when a kernel runs. A stand-in package of each such name (and every
submodule under it) gives any name asked of it: a class that can be subclassed,
decorated with, called, indexed and read attributes of, and that computes nothing.
The pre-fix and the reverted module both import the same stand-ins, so what they bind
from them compares equal. Never used outside this benchmark.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

PACKAGES = ("cuda", "cutlass", "quack", "sgl_kernel_npu")
"""The packages stood in for, when the environment lacks them."""


STUBBED = ("sgl_kernel",)
"""Packages the suite's stand-ins (tests/sglang/stubs) provide without every submodule:
a submodule they lack is stood in for too."""


def install(packages: Sequence[str] = PACKAGES, *, stubbed: Sequence[str] = STUBBED) -> list[str]:
    """Stand in for each of `packages` that does not import here, and for the submodules
    the stand-in packages of `stubbed` lack; the packages stood in for."""
    missing = [name for name in packages if not _importable(name)]
    stubs = tuple(name for name in stubbed if _is_stub(name))
    if missing or stubs:
        sys.meta_path.append(_Finder(tuple(missing), submodules_of=stubs))
    return missing


class _Anything(type):
    """The metaclass of a stand-in name: any attribute, call or index gives another one."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stand_in(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args: object, **kwargs: object) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator: the function itself
        return _stand_in(f"{cls.__qualname__}()")

    def __getitem__(cls, key: object) -> Any:
        return _stand_in(f"{cls.__qualname__}[]")

    def __or__(cls, other: object) -> Any:
        return cls

    def __ror__(cls, other: object) -> Any:
        return cls


def _stand_in(qualname: str) -> type:
    made = _Anything(qualname.rsplit(".", 1)[-1], (), {"__qualname__": qualname})
    return made


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stand_in(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: what nothing else found, under the packages it stands in for."""

    def __init__(self, packages: tuple[str, ...], *, submodules_of: tuple[str, ...]) -> None:
        self.packages = packages
        self.submodules_of = submodules_of

    def find_spec(self, name: str, path: object, target: object = None) -> Any:
        top, dot, _ = name.partition(".")
        if top not in self.packages and not (dot and top in self.submodules_of):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        setattr(module, "__version__", "0.0.0+stand-in")  # noqa: B010


def _is_stub(name: str) -> bool:
    return _importable(name) and bool(getattr(sys.modules[name], "IS_PRTOGGLE_STUB", False))


def _importable(name: str) -> bool:
    try:
        __import__(name)
    except Exception:
        return False
    return True

"""Environment variables a warm worker's preload may have read, and a run that changes one.

A fresh process imports torch or triton after its program (a suite's conftest.py) has set
its variables; a warm run finds them imported already, with the values the server had.
Triton reads TRITON_INTERPRET when it decorates its own `@jit` functions, torch reads its
TORCH_* variables at import: a run that sets such a variable would not get what a fresh
process gets. The server records the variables its preload reads (in Python; reads made
during a whole-environment copy are left out) and adds the prefixes of the preloaded
packages whose native code was loaded (an extension module reads its variables where Python
cannot see it; a pure-Python package's import-time reads are all recorded). In a run, setting
or deleting one of them to a value other than the one the preload saw, or than the one the
preload set itself, calls `on_change` with the name and the new value (the run's notice to
the client, which then builds a worker whose preload sees that value, or runs it as a fresh
process). A worker built so
expects each run to set those variables as the first one did (`expect_run`): a run that
ends without having set one of them that way is named by `unset_expected()`.
Process-global: os.environ's class is swapped once, in the server, before the preload.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.machinery import EXTENSION_SUFFIXES

from prtoggle.runners.warm_eligibility import RUNTIME_VARIABLES

TORCH_NATIVE_PREFIXES = ("TORCH_", "TORCHELASTIC_", "PYTORCH_", "CUDA_", "NCCL_", "OMP_")
"""What libtorch's shared objects name (TORCHINDUCTOR_* and TORCHDYNAMO_* are read in Python
only: seen when the preload reads them)."""
NATIVE_PREFIXES: Mapping[str, tuple[str, ...]] = {
    "torch": (*TORCH_NATIVE_PREFIXES, "MKL_", "KMP_", "CUBLAS", "CUDNN"),
    "triton": ("TRITON_",),
    "sgl_kernel": ("SGL_", "SGLANG_"),
}
"""Per preloaded package, the prefixes of the variables its native code may read at import
(any other package with an extension module loaded: its name upper-cased and `_`)."""
UNWATCHED_PACKAGES = frozenset({"prtoggle", "pytest", "_pytest"})
"""Packages that read their variables when used, never at import (prtoggle's, pytest's)."""
UNWATCHED_VARIABLES = frozenset({*RUNTIME_VARIABLES, "PYTEST_CURRENT_TEST", "PYTEST_VERSION"})
"""Variables set or read at use only (pytest sets its own in every process, warm or not)."""


@dataclass
class EnvironWatch:
    """What the preload read; once watching, who to tell about a run's change."""

    before: dict[str, str] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)
    written: dict[str, str | None] = field(default_factory=dict)
    """Variables the preload itself set (None: deleted), with the values it left: torch sets
    TORCHINDUCTOR_CACHE_DIR to its default when it reads it unset."""
    prefixes: tuple[str, ...] = ()
    recording: bool = False
    bulk_depth: int = 0
    on_change: Callable[[str, str | None], None] | None = None
    expected: dict[str, str | None] = field(default_factory=dict)
    """Variables this run must set as the worker's preload saw them (name -> value)."""
    confirmed: set[str] = field(default_factory=set)

    def watched(self, name: str) -> bool:
        if name in UNWATCHED_VARIABLES:
            return False
        return name in self.read or name.startswith(self.prefixes)

    def changed(self, name: str, value: str | None) -> None:
        """A run sets (or, None, deletes) `name`: tell on_change if a preload may have read it."""
        if name in self.expected and self.expected[name] == value:
            self.confirmed.add(name)
        if self.on_change is None or not self.watched(name) or self._as_preloaded(name, value):
            return
        notify, self.on_change = self.on_change, None  # once
        notify(name, value)

    def _as_preloaded(self, name: str, value: str | None) -> bool:
        """`value` is what the preload saw, or what it set itself (a fresh process whose
        import reads the variable unset sets the same value: the state after the import)."""
        if self.before.get(name) == value:
            return True
        return name in self.written and self.written[name] == value


WATCH = EnvironWatch()

MAX_REBUILDS = 3
"""How many times a worker is built again for variables its runs set (then: plain runs)."""
MAX_UNSET = 3
"""How many runs that end without setting an adopted variable are made again as plain
children before the worker steps aside (then: plain runs)."""


@dataclass(frozen=True)
class StaleNotice:
    """A warm run set `name` to `value` (None: deleted) where the preload saw otherwise;
    `unset`: it ended without setting `name` to `value`, as the worker expected."""

    name: str
    value: str | None
    unset: bool = False


def record_preload_reads() -> None:
    """In the server, before the preload: note each variable read from now on."""
    WATCH.before = dict(os.environ)
    WATCH.recording = True
    os.environ.__class__ = _WatchedEnviron


def record_more_reads() -> None:
    """In the server, before it imports more modules after its preload: note the variables
    read again (the environment before the preload stays the reference)."""
    WATCH.recording = True


def stop_recording(preloaded: list[str]) -> None:
    """After the preload: stop noting reads; watch the prefixes of the packages whose native
    code the preload loaded (torch's and triton's always)."""
    WATCH.recording = False
    WATCH.prefixes = native_prefixes(preloaded, loaded=sys.modules)
    names = set(WATCH.before) | set(os.environ)
    WATCH.written = {
        name: os.environ.get(name)
        for name in sorted(names)
        if os.environ.get(name) != WATCH.before.get(name)
    }


def native_prefixes(preloaded: list[str], *, loaded: Mapping[str, object]) -> tuple[str, ...]:
    """The variable prefixes to watch for the packages of `preloaded`, given the modules
    now `loaded`: a package's own prefix only where one of its extension modules is loaded."""
    native_tops = {name.split(".", 1)[0] for name, module in loaded.items() if _native(module)}
    prefixes: list[str] = []
    for top in dict.fromkeys(name.split(".", 1)[0] for name in preloaded):
        if top in NATIVE_PREFIXES:
            prefixes.extend(NATIVE_PREFIXES[top])
        elif top in native_tops and top not in UNWATCHED_PACKAGES:
            prefixes.append(top.upper() + "_")
    return tuple(prefixes)


def watch_run(on_change: Callable[[str, str | None], None]) -> None:
    """In a run, once its environment is in place: `on_change(name, value)` at the first
    change (value None: deleted)."""
    WATCH.on_change = on_change


def expect_run(expected: dict[str, str | None]) -> None:
    """In a run: the variables it must set as the preload saw them (the worker was built
    with the values an earlier run of the command set)."""
    WATCH.expected = dict(expected)
    WATCH.confirmed = set()


def unset_expected() -> list[str]:
    """At the end of a run: the expected variables it did not set as expected."""
    return sorted(name for name in WATCH.expected if name not in WATCH.confirmed)


def no_rebuild_reason(
    notice: StaleNotice, adopted: dict[str, str | None], rebuilds: int
) -> str | None:
    """Why a worker built again for `notice` could not serve the command; None: it can."""
    if notice.unset:
        return f"{MAX_UNSET} runs did not set {notice.name} as the first did"
    if notice.name in adopted:
        return f"runs set {notice.name} to different values"
    if rebuilds >= MAX_REBUILDS:
        return f"runs set {notice.name} and {rebuilds} more variables"
    return None


def _native(module: object) -> bool:
    """Whether `module` is an extension module (compiled code loaded from a shared object)."""
    path = getattr(module, "__file__", None)
    return isinstance(path, str) and path.endswith(tuple(EXTENSION_SUFFIXES))


class _WatchedEnviron(os._Environ):
    """os.environ that notes reads (while the preload records) and a run's changes."""

    def __getitem__(self, key: str) -> str:
        if WATCH.recording and not WATCH.bulk_depth:
            WATCH.read.add(key)
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[str]:
        WATCH.bulk_depth += 1  # a copy of the whole environment reads no one variable
        try:
            yield from super().__iter__()
        finally:
            WATCH.bulk_depth -= 1

    def __setitem__(self, key: str, value: str) -> None:
        WATCH.changed(key, value)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        WATCH.changed(key, None)
        super().__delitem__(key)

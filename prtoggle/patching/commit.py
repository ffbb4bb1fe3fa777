"""Planned changes landed in one step that no other thread can see half done.

A revert is prepared first (every replacement code object compiled, every `define` run
into a scratch namespace, every check done), recording each change as a plain C-level
operation (a dict item set or deleted, an attribute set or deleted) on a Commit. `run()`
then performs them all inside one C call chain (`list(starmap(operator.call, ...))`), with
the cyclic garbage collector off: the interpreter's evaluation loop is never entered, so
no other thread runs between the first change and the last, and no finaliser runs (the
Commit holds the objects it replaces). Before and at that instant it looks at the other
threads' stacks: while one is inside a function being swapped, or inside code of a changed
namespace that reads a changed name, it waits (up to MAX_WAIT_S) so a call in progress is
not continued against the other program; past that it lands anyway.
"""

from __future__ import annotations

import gc
import itertools
import logging
import operator
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import CodeType, FrameType, FunctionType
from typing import Any

from prtoggle.errors import PatchApplicationError

logger = logging.getLogger(__name__)

Op = tuple[Any, ...]
"""A C-level callable (setattr, operator.setitem, dict.pop, ...) and its arguments."""

MAX_WAIT_S = 1.0
"""How long a commit waits for other threads to leave the code it changes."""
_PAUSE_S = 0.0005


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT: object = _Absent()
"""A name or attribute that is not bound."""


@dataclass
class Commit:
    """The changes of one apply or restore, performed by run() as one step."""

    label: str = ""
    _ops: list[Op] = field(default_factory=list)
    _undo: list[Op] = field(default_factory=list)
    _aborts: list[Callable[[], None]] = field(default_factory=list)
    _after: list[Callable[[], None]] = field(default_factory=list)
    _codes: set[int] = field(default_factory=set)
    _names: dict[int, tuple[dict[str, object], dict[str, object]]] = field(default_factory=dict)
    """id of a namespace -> (the namespace, name -> the value it will hold or ABSENT)."""
    _planned_code: dict[int, CodeType] = field(default_factory=dict)

    def set_item(self, namespace: dict[str, object], name: str, value: object) -> None:
        """Bind `name` in a module's namespace (`ABSENT`: delete it) at commit."""
        previous = namespace.get(name, ABSENT)
        self._op(namespace, name, value, previous, item=True)
        self._names.setdefault(id(namespace), (namespace, {}))[1][name] = value

    def set_attr(self, holder: object, name: str, value: object) -> None:
        """Set (`ABSENT`: delete) an attribute of a class or function at commit."""
        previous = (
            vars(holder).get(name, ABSENT) if isinstance(holder, type) else getattr(holder, name)
        )
        self._op(holder, name, value, previous, item=False)

    def swap_code(self, function: FunctionType, code: CodeType) -> None:
        """Give `function` the code `code` at commit; code running it now is waited for."""
        current = function.__code__
        self._codes.add(id(current))
        self._planned_code[id(function)] = code
        self._op(function, "__code__", code, current, item=False)

    def code_of(self, function: FunctionType) -> CodeType:
        """The code `function` will have once this commit has run."""
        return self._planned_code.get(id(function), function.__code__)

    def names_after(self, namespace: dict[str, object]) -> set[str]:
        """The names `namespace` will bind once this commit has run."""
        changed = self.planned_values(namespace)
        kept = {name for name in namespace if changed.get(name) is not ABSENT}
        return kept | {name for name, value in changed.items() if value is not ABSENT}

    def planned_values(self, namespace: dict[str, object]) -> dict[str, object]:
        """name -> value (or ABSENT) of each name of `namespace` this commit changes."""
        return dict(self._names.get(id(namespace), (namespace, {}))[1])

    def on_abort(self, callback: Callable[[], None]) -> None:
        """Bookkeeping to undo when the commit never runs (a later step of the plan failed)."""
        self._aborts.append(callback)

    def after(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the changes are in (clearing caches, say)."""
        self._after.append(callback)

    def abort(self) -> None:
        """Forget the plan: undo its bookkeeping, last first; nothing was changed."""
        while self._aborts:
            self._aborts.pop()()
        self._ops.clear()
        self._undo.clear()

    def run(self) -> None:
        """Perform every change as one step, waiting for calls in progress (see module doc)."""
        if self._ops:
            deadline = time.monotonic() + MAX_WAIT_S
            own = threading.get_ident()
            while True:
                last = time.monotonic() >= deadline
                if not last and self._in_flight(sys._current_frames(), own):
                    time.sleep(_PAUSE_S)
                    continue
                try:
                    frames = _perform(self._ops, self._undo)
                except Exception as exc:  # never expected: prepare checks every change
                    self.abort()
                    raise PatchApplicationError(
                        f"{self.label}: the changes could not be made in one step "
                        f"({type(exc).__name__}: {exc}); nothing was changed"
                    ) from exc
                if last or not self._in_flight(frames, own):
                    break
                _perform(self._undo[::-1], self._ops[::-1])  # a thread was mid-call: not now
                time.sleep(_PAUSE_S)
            if last:
                logger.debug("%s: landed while another thread ran the code it changes", self.label)
        self._aborts.clear()
        while self._after:
            self._after.pop(0)()

    def _op(
        self, holder: object, name: str, value: object, previous: object, *, item: bool
    ) -> None:
        self._ops.append(_operation(holder, name, value, item=item))
        self._undo.append(_operation(holder, name, previous, item=item))

    def _in_flight(self, frames: dict[int, FrameType], own: int) -> bool:
        for ident, top in frames.items():
            frame: FrameType | None = None if ident == own else top
            while frame is not None:
                code = frame.f_code
                if id(code) in self._codes:
                    return True
                changed = self._names.get(id(frame.f_globals))
                if changed is not None and not changed[1].keys().isdisjoint(code.co_names):
                    return True
                frame = frame.f_back
        return False


def _operation(holder: object, name: str, value: object, *, item: bool) -> Op:
    if item:
        assert isinstance(holder, dict)
        if value is ABSENT:
            return (holder.pop, name, None)
        return (operator.setitem, holder, name, value)
    if value is ABSENT:
        return (type.__delattr__ if isinstance(holder, type) else delattr, holder, name)
    if isinstance(holder, type):
        return (type.__setattr__, holder, name, value)
    return (setattr, holder, name, value)


def _perform(ops: list[Op], undo: list[Op]) -> dict[int, FrameType]:
    """Every op in one C call chain (no bytecode runs: no thread switch, no GC); returns
    the other threads' frames as they were at that instant."""
    enabled = gc.isenabled()
    chain = [(gc.disable,), (sys._current_frames,), *ops]
    try:
        results = list(itertools.starmap(operator.call, chain))
    except BaseException:
        _perform_each(reversed(undo))
        raise
    finally:
        if enabled:
            gc.enable()
    frames = results[1]
    assert isinstance(frames, dict)
    return frames


def _perform_each(ops: Iterable[Op]) -> None:
    """Undo after a change failed half way (never expected: prepare checks them all): each
    op on its own, one that cannot apply (its change never happened) skipped."""
    for op in ops:
        try:
            operator.call(*op)
        except (AttributeError, KeyError, TypeError, ValueError):
            continue

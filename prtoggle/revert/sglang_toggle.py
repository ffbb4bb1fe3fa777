"""sglang's own SGLANG_DEBUG_REVERT_PR toggle, taken over wherever prtoggle's is in force.

sglang reads the same variable: `Scheduler.__init__` calls
`sglang.srt.debug_utils.pr_fix_toggle.maybe_revert_pr_fix()`, which parses it as one int and
applies sglang's own recipe text (stale for some fixes, unknown for prtoggle's own, and a
second copy of a revert prtoggle already put in force). Taken over, that function runs
`prtoggle.revert.toggle.maybe_revert_pr_fix()` instead (idempotent): its code object is
swapped for one that calls prtoggle, so every name already bound to it (scheduler.py
imports it with `from ... import`) runs prtoggle's too. It is done at once when the module
is imported, otherwise the moment its body has run (and again after a reload), through an
import hook that watches that one module.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from types import FunctionType, ModuleType
from typing import cast

from prtoggle.patching.import_hook import ModuleLoadedFinder

SGLANG_TOGGLE_MODULE = "sglang.srt.debug_utils.pr_fix_toggle"
"""Where sglang reads SGLANG_DEBUG_REVERT_PR (in 0.5.23, nowhere else)."""
SGLANG_TOGGLE_FUNCTION = "maybe_revert_pr_fix"

__all__ = ["SGLANG_TOGGLE_FUNCTION", "SGLANG_TOGGLE_MODULE", "is_taken_over", "take_over"]

logger = logging.getLogger(__name__)


def take_over(toggle: Callable[[], object]) -> None:
    """From now on in this process, sglang's own toggle calls `toggle` (prtoggle's
    maybe_revert_pr_fix) instead. Idempotent.

    Now if sglang's pr_fix_toggle module is imported, else as soon as it is.
    """
    _TOGGLE[:] = [toggle]
    _FINDER.install()
    module = sys.modules.get(SGLANG_TOGGLE_MODULE)
    if module is not None:
        _take_over_module(module)


def is_taken_over() -> bool:
    """Whether sglang's imported `maybe_revert_pr_fix` runs prtoggle's toggle now."""
    module = sys.modules.get(SGLANG_TOGGLE_MODULE)
    function = getattr(module, SGLANG_TOGGLE_FUNCTION, None)
    return isinstance(function, FunctionType) and function.__code__ is _BY_PRTOGGLE.__code__


def _by_prtoggle() -> None:
    """sglang's maybe_revert_pr_fix, taken over: prtoggle's toggle, idempotent.

    Runs as sglang's function object (its globals are pr_fix_toggle's): it only imports.
    """
    import sys

    for toggle in sys.modules["prtoggle.revert.sglang_toggle"]._TOGGLE:
        toggle()


_BY_PRTOGGLE = cast(FunctionType, _by_prtoggle)
_TOGGLE: list[Callable[[], object]] = []
"""What sglang's taken-over toggle calls (set by take_over)."""


def _take_over_module(module: ModuleType) -> None:
    function = getattr(module, SGLANG_TOGGLE_FUNCTION, None)
    if not isinstance(function, FunctionType):
        return  # an sglang without the toggle: nothing reads the variable there
    if function.__code__ is _BY_PRTOGGLE.__code__:
        return
    if function.__code__.co_freevars:
        # Not sglang 0.5.23's plain function: names bound to it before now keep sglang's code.
        setattr(module, SGLANG_TOGGLE_FUNCTION, _BY_PRTOGGLE)
    else:
        function.__code__ = _BY_PRTOGGLE.__code__
    logger.debug("%s.%s runs prtoggle's toggle", module.__name__, SGLANG_TOGGLE_FUNCTION)


def _on_loaded(name: str) -> None:
    module = sys.modules.get(name)
    if module is not None:
        _take_over_module(module)


_FINDER = ModuleLoadedFinder(is_watched=SGLANG_TOGGLE_MODULE.__eq__, on_loaded=_on_loaded)

"""Deferred reverts that fail or land at an import: the state tells, the child layer listens."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from prtoggle.errors import PatchApplicationError

__all__ = ["failed", "landed", "listen"]


@dataclass
class _Listeners:
    """Who hears of a deferred revert that failed (before it is raised) or that landed."""

    on_failure: list[Callable[[PatchApplicationError], None]] = field(default_factory=list)
    on_landed: list[Callable[[int], None]] = field(default_factory=list)


_LISTENERS = _Listeners()


def listen(
    *,
    on_failure: Callable[[PatchApplicationError], None] | None = None,
    on_landed: Callable[[int], None] | None = None,
) -> None:
    """Be called when a deferred revert fails at an import (before the importing statement
    gets the error), or with the PR when some of its deferred targets were patched.

    Process-global and for the process's lifetime; a listener is added once.
    """
    if on_failure is not None and on_failure not in _LISTENERS.on_failure:
        _LISTENERS.on_failure.append(on_failure)
    if on_landed is not None and on_landed not in _LISTENERS.on_landed:
        _LISTENERS.on_landed.append(on_landed)


def failed(exc: PatchApplicationError) -> None:
    """A deferred revert failed: tell the listeners (the caller raises `exc` afterwards)."""
    for listener in _LISTENERS.on_failure:
        listener(exc)


def landed(pr: int) -> None:
    """Deferred targets of `pr` were patched: tell the listeners."""
    for listener in _LISTENERS.on_landed:
        listener(pr)

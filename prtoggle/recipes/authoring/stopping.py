"""Drafts that stop half-way when asked, leaving nothing: what `bisect --git` drafted ahead.

`bisect --git` drafts ahead while a probe runs, and a draft the run's verdict made useless
stops at its next stop point (a file, a check). A stopped draft raises DraftStopped and
leaves nothing behind (no recipe written, no cache record); what it computed on the way
(module comparisons, parsed texts) stays in the process's caches for the draft that does
it again. Asking is per thread: `stoppable(event)` marks the drafts the calling thread
makes from then on; another thread sets the event.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_LOCAL = threading.local()


class DraftStopped(Exception):
    """A draft stopped half-way because its stop was asked for: it left nothing."""


@contextlib.contextmanager
def stoppable(stop: threading.Event) -> Iterator[None]:
    """Drafts made in this thread inside stop at their next stop point once `stop` is set."""
    before = getattr(_LOCAL, "stop", None)
    _LOCAL.stop = stop
    try:
        yield
    finally:
        _LOCAL.stop = before


def stop_point() -> None:
    """Raise DraftStopped when the draft this thread is making was asked to stop."""
    stop: threading.Event | None = getattr(_LOCAL, "stop", None)
    if stop is not None and stop.is_set():
        raise DraftStopped

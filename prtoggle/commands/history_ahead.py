"""Work `bisect --git` does while a probe runs: the recipes the next probes may need.

A probe's run is mostly waiting on a child process. `Ahead` runs that wait in one helper
thread (the same for every run) and meanwhile, in the calling thread, does queued work whose
result a later step may ask for: the reach of each candidate during the first run, the
recipes of the two probes the binary search may take next during each probe. A result is
kept by key; a step that finds none does the work itself. Queued work starts only while the
run is still going, and work left queued when the run ends is dropped at the next plan. A
plan may say which jobs each verdict of the run leaves useful (`after`): when the run ends
with a verdict that leaves the job under way useless, that job stops at its next stop
point (recipes/authoring/stopping.py) and leaves no result (a later step asking for it
does it again); otherwise the job under way finishes. Queued work runs in the caller's
thread, so Ctrl-C interrupts it at once; the helper thread only waits on the run, whose
children the signal ends.

`fewer_collections()` makes the garbage collector run less often for the search: drafting
builds and drops syntax trees by the million, which reference counting frees, and young
collections over them were about a quarter of a draft's time (a 36-commit sglang suffix:
13.6 s, 10.0 s with the thresholds below). Process-global while it lasts.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prtoggle.recipes.authoring.stopping import DraftStopped, stoppable

T = TypeVar("T")

DRAFTING_THRESHOLDS = (10_000, 50, 100)
"""gc thresholds while `bisect --git` searches (CPython's defaults: 700, 10, 10)."""


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect garbage at DRAFTING_THRESHOLDS inside; the thresholds before, after."""
    before = gc.get_threshold()
    gc.set_threshold(*DRAFTING_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@dataclass
class Ahead:
    """Queued jobs (key, work) and the results of those that ran, by key."""

    queued: list[tuple[str, Callable[[], Any]]] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    failures: dict[str, Exception] = field(default_factory=dict)
    useful_after: dict[str, frozenset[str]] = field(default_factory=dict)
    """Per verdict of the coming run, the keys still useful once it has ended with it."""
    _running: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _helper: ThreadPoolExecutor | None = field(default=None, repr=False)
    """One thread for every run: a warm worker's server started from it (a rebuilt one)
    is told to end when the thread that started it ends (Linux's parent-death signal
    follows the thread), so the thread lives as long as the search."""

    def plan(
        self,
        jobs: list[tuple[str, Callable[[], Any]]],
        *,
        after: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        """Replace the queue with `jobs` (those already done, and a key's repeats, left out);
        `after`: per verdict of the coming run, the keys it leaves useful (none: every job
        under way finishes)."""
        queued: dict[str, Callable[[], Any]] = {}
        for key, work in jobs:
            if key not in queued and not self.known(key):
                queued[key] = work
        self.queued = list(queued.items())
        self.useful_after = {verdict: frozenset(keys) for verdict, keys in (after or {}).items()}

    def known(self, key: str) -> bool:
        return key in self.results or key in self.failures

    def take(self, key: str, work: Callable[[], T]) -> T:
        """The result of `key`: done ahead, else done now. An error met ahead is raised
        here, where the step asks for it (never where it was met)."""
        if key in self.failures:
            raise self.failures.pop(key)
        if key in self.results:
            return self.results.pop(key)
        return work()

    def alongside(
        self, run: Callable[[], T], *, verdict: Callable[[T], str | None] | None = None
    ) -> T:
        """`run()` in the helper thread while the queued jobs run here; its result (or its
        exception, raised here). `verdict`: what the run's result says (None: unknown), to
        stop the job under way when the plan says that verdict leaves it useless."""
        if self._helper is None:
            self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prtoggle-run")

        def watched() -> T:
            result = run()
            if verdict is not None:
                self._stop_if_useless(verdict(result))
            return result

        pending = self._helper.submit(watched)
        while self.queued and not pending.done():
            key, work = self.queued.pop(0)
            self._do(key, work)
        return pending.result()

    def close(self) -> None:
        """Wait for the helper thread to end (after its run: close the runner first)."""
        if self._helper is not None:
            self._helper.shutdown(wait=True)
            self._helper = None

    def _stop_if_useless(self, verdict: str | None) -> None:
        """Ask the job under way to stop when `verdict` leaves it useless (helper thread)."""
        useful = self.useful_after.get(verdict) if verdict is not None else None
        with self._lock:
            if useful is not None and self._running is not None and self._running not in useful:
                self._stop.set()

    def _do(self, key: str, work: Callable[[], Any]) -> None:
        with self._lock:
            self._running = key
            self._stop.clear()
        try:
            with stoppable(self._stop):
                self.results[key] = work()
        except DraftStopped:
            pass  # useless now; a step that asks for it after all does it again
        except Exception as exc:  # raised by `take`, should a step ask for it
            self.failures[key] = exc
        finally:
            with self._lock:
                self._running = None

"""Work `bisect --git` does while a probe runs: the recipes the next probes may need.

A probe's run is mostly waiting on a child process. `Ahead` runs that wait in one helper
thread (the same for every run) and meanwhile, in the calling thread, does queued work whose
result a later step may ask for: the reach of each candidate during the first run, the
recipes of the two probes the binary search may take next during each probe. A result is
kept by key; a step that finds none does the work itself. Queued work starts only while the
run is still going (a run that ends first costs at most the job already started), and work
left queued when the run ends is dropped at the next plan. Queued work runs in the caller's
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
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
    _helper: ThreadPoolExecutor | None = field(default=None, repr=False)
    """One thread for every run: a warm worker's server started from it (a rebuilt one)
    is told to end when the thread that started it ends (Linux's parent-death signal
    follows the thread), so the thread lives as long as the search."""

    def plan(self, jobs: list[tuple[str, Callable[[], Any]]]) -> None:
        """Replace the queue with `jobs` (those already done, and a key's repeats, left out)."""
        queued: dict[str, Callable[[], Any]] = {}
        for key, work in jobs:
            if key not in queued and not self.known(key):
                queued[key] = work
        self.queued = list(queued.items())

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

    def alongside(self, run: Callable[[], T]) -> T:
        """`run()` in the helper thread while the queued jobs run here; its result (or its
        exception, raised here)."""
        if self._helper is None:
            self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prtoggle-run")
        pending = self._helper.submit(run)
        while self.queued and not pending.done():
            key, work = self.queued.pop(0)
            self._do(key, work)
        return pending.result()

    def close(self) -> None:
        """Wait for the helper thread to end (after its run: close the runner first)."""
        if self._helper is not None:
            self._helper.shutdown(wait=True)
            self._helper = None

    def _do(self, key: str, work: Callable[[], Any]) -> None:
        try:
            self.results[key] = work()
        except Exception as exc:  # raised by `take`, should a step ask for it
            self.failures[key] = exc

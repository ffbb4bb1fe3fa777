"""The one parallel-run pool: results in task order; an early way out starts nothing more."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from prtoggle.runners.pool import run_parallel


def test_results_come_in_task_order_and_each_is_reported_as_it_finishes() -> None:
    finished: list[int] = []
    results = run_parallel(
        [lambda: "a", lambda: "b", lambda: "c"], jobs=2, on_done=lambda i, _: finished.append(i)
    )
    assert results == ["a", "b", "c"]
    assert sorted(finished) == [0, 1, 2]


def test_an_interrupt_cancels_the_queued_tasks_without_waiting_for_running_ones() -> None:
    release = threading.Event()
    started: list[str] = []

    def blocked() -> str:
        started.append("blocked")
        release.wait(timeout=30)
        return "blocked"

    def queued() -> str:
        started.append("queued")
        return "queued"

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        started_at = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            run_parallel([blocked, blocked, queued], jobs=2)
        assert time.monotonic() - started_at < 5  # it did not wait for the two running tasks
        assert started == ["blocked", "blocked"]
    finally:
        release.set()
        signal.signal(signal.SIGALRM, previous)

"""history_ahead: work done while a probe runs, taken by the step that needs it, and one
helper thread for every run (a warm server started from it lives as long as the search)."""

from __future__ import annotations

import gc
import sys
import threading
import time

import pytest

from prtoggle.commands.history_ahead import DRAFTING_THRESHOLDS, Ahead, fewer_collections
from prtoggle.errors import PrToggleError
from prtoggle.recipes.authoring.stopping import stop_point
from prtoggle.runners.warm_client import WarmWorker


def test_work_done_ahead_is_taken_once_and_other_work_is_done_when_asked() -> None:
    ahead = Ahead()
    done: list[str] = []
    ahead.plan([("a", lambda: done.append("a") or "drafted ahead")])
    try:
        assert ahead.alongside(lambda: time.sleep(0.5) or "ran") == "ran"
    finally:
        ahead.close()
    assert done == ["a"]
    assert ahead.take("a", lambda: "drafted now") == "drafted ahead"
    assert ahead.take("a", lambda: "drafted now") == "drafted now"
    assert ahead.take("b", lambda: "drafted now") == "drafted now"


def test_an_error_met_ahead_is_raised_where_the_step_asks_for_it() -> None:
    def refused() -> str:
        raise PrToggleError("calc/core.py: the draft is refused")

    ahead = Ahead()
    ahead.plan([("a", refused)])
    try:
        ahead.alongside(lambda: time.sleep(0.5))  # met here, not raised
    finally:
        ahead.close()
    with pytest.raises(PrToggleError, match=r"^calc/core.py: the draft is refused$"):
        ahead.take("a", lambda: "drafted now")


def test_queued_work_starts_only_while_the_run_goes_on() -> None:
    started = threading.Event()
    returned = threading.Event()
    done: list[str] = []

    def run() -> str:
        started.wait(timeout=30)
        returned.set()
        return "ran"

    def first() -> None:
        started.set()
        returned.wait(timeout=30)
        time.sleep(0.3)  # the run's future is done by now
        done.append("first")

    ahead = Ahead()
    ahead.plan([("first", first), ("second", lambda: done.append("second"))])
    try:
        assert ahead.alongside(run) == "ran"
    finally:
        ahead.close()
    assert done == ["first"]
    assert not ahead.known("second")


def test_every_run_goes_through_one_helper_thread_until_close() -> None:
    ahead = Ahead()
    idents = [ahead.alongside(threading.get_ident) for _ in range(3)]
    helper = next(t for t in threading.enumerate() if t.ident == idents[0])
    ahead.close()
    assert len(set(idents)) == 1
    assert idents[0] != threading.get_ident()
    assert not helper.is_alive()


def test_a_run_that_raises_raises_in_the_caller() -> None:
    ahead = Ahead()
    try:
        with pytest.raises(KeyError, match="missing"):
            ahead.alongside(lambda: {}["missing"])
    finally:
        ahead.close()


def test_a_warm_server_started_during_a_run_serves_the_runs_after_it() -> None:
    # Linux sends a server its parent-death signal when the *thread* that started it ends:
    # a thread per run would end the server after the run that started it
    ahead = Ahead()
    code = "import os; print(os.getppid())"
    with WarmWorker(preload=("json",)) as worker:
        try:
            runs = [ahead.alongside(lambda: worker.run([sys.executable, "-c", code])) for _ in "ab"]
        finally:
            worker.close()
            ahead.close()
    assert [run.returncode for run in runs] == [0, 0]
    assert worker.warm_runs == 2
    assert runs[0].stdout == runs[1].stdout  # forked by the same server


def test_fewer_collections_raises_the_thresholds_inside_and_puts_them_back() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == DRAFTING_THRESHOLDS != before
    assert gc.get_threshold() == before
    with pytest.raises(KeyboardInterrupt), fewer_collections():  # after an interrupt too
        raise KeyboardInterrupt
    assert gc.get_threshold() == before


def test_a_job_planned_twice_is_done_once() -> None:
    ahead = Ahead()
    done: list[str] = []
    ahead.plan([("a", lambda: done.append("first")), ("b", lambda: 2), ("a", lambda: 3)])
    assert [key for key, _ in ahead.queued] == ["a", "b"]
    ahead.alongside(lambda: time.sleep(0.3))
    assert done == ["first"]


def _draft_until_stopped(steps: list[int], started: threading.Event) -> str:
    """A draft of 50 steps of 0.05 s, each ending at a stop point."""
    started.set()
    for step in range(50):
        time.sleep(0.05)
        steps.append(step)
        stop_point()
    return "drafted"


@pytest.mark.parametrize(
    ("verdict", "finished"), [("bad", False), ("good", True), (None, True)], ids=str
)
def test_a_job_the_runs_verdict_leaves_useless_stops_and_leaves_no_result(
    verdict: str | None, finished: bool
) -> None:
    started = threading.Event()
    steps: list[int] = []
    ahead = Ahead()
    ahead.plan(
        [("draft", lambda: _draft_until_stopped(steps, started))],
        after={"bad": ["other"], "good": ["draft"]},
    )
    try:
        ran = ahead.alongside(lambda: started.wait(30) and "ran", verdict=lambda _: verdict)
    finally:
        ahead.close()
    assert ran == "ran"
    assert ahead.known("draft") == finished
    if finished:
        assert len(steps) == 50
    else:  # stopped at the first stop point after the run ended
        assert len(steps) < 10
    assert ahead.take("draft", lambda: "drafted now") == ("drafted" if finished else "drafted now")


def test_a_stopped_job_does_not_stop_the_next_one_nor_a_draft_made_when_asked() -> None:
    started = threading.Event()
    steps: list[int] = []
    ahead = Ahead()
    ahead.plan(
        [("useless", lambda: _draft_until_stopped(steps, started))],
        after={"bad": ["wanted"]},
    )
    try:
        ahead.alongside(lambda: started.wait(30), verdict=lambda _: "bad")
        ahead.plan([("wanted", lambda: _draft_until_stopped(steps, threading.Event()))])
        ahead.alongside(lambda: time.sleep(0.2))
    finally:
        ahead.close()
    assert not ahead.known("useless") and ahead.known("wanted")
    assert ahead.take("useless", lambda: _draft_until_stopped([], threading.Event())) == "drafted"

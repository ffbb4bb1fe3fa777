"""Tests for planned changes landed in one step (prtoggle.patching.commit)."""

from __future__ import annotations

import threading
import time
from types import FunctionType

import pytest

from prtoggle.errors import PatchApplicationError
from prtoggle.patching import commit as commit_module
from prtoggle.patching.commit import ABSENT, Commit


class Holder:
    kept = "post"


def post() -> str:
    return "post"


def pre() -> str:
    return "pre"


def test_a_commit_changes_nothing_until_it_runs_then_everything_and_undoes_its_record() -> None:
    namespace: dict[str, object] = {"LIMIT": 8192, "new_helper": post}
    function = _copy(post)
    record: list[str] = []
    commit = Commit(label="PR 1")
    commit.set_item(namespace, "LIMIT", 4096)
    commit.set_item(namespace, "new_helper", ABSENT)
    commit.set_attr(Holder, "kept", "pre")
    commit.swap_code(function, pre.__code__)
    commit.on_abort(lambda: record.append("aborted"))
    commit.after(lambda: record.append("after"))
    assert namespace == {"LIMIT": 8192, "new_helper": post} and function() == "post"
    assert commit.names_after(namespace) == {"LIMIT"}
    assert commit.code_of(function) is pre.__code__
    commit.run()
    assert namespace == {"LIMIT": 4096} and Holder.kept == "pre" and function() == "pre"
    assert record == ["after"]
    back = Commit()
    back.set_item(namespace, "LIMIT", 8192)
    back.set_item(namespace, "new_helper", post)
    back.set_attr(Holder, "kept", "post")
    back.swap_code(function, post.__code__)
    back.on_abort(lambda: record.append("aborted"))
    back.abort()
    back.run()
    assert namespace == {"LIMIT": 4096} and record == ["after", "aborted"]
    Holder.kept = "post"


def test_a_commit_waits_for_a_thread_inside_the_function_it_swaps() -> None:
    function = _copy(post)
    inside, leave = threading.Event(), threading.Event()
    log: list[str] = []

    def caller() -> None:
        log.append(function(inside, leave))

    function.__code__ = _blocking.__code__
    thread = threading.Thread(target=caller)
    thread.start()
    assert inside.wait(10)
    threading.Timer(0.05, leave.set).start()
    commit = Commit()
    commit.swap_code(function, _other_blocking.__code__)
    commit.after(lambda: log.append("landed"))
    commit.run()
    thread.join(10)
    assert log == ["blocking", "landed"]


def test_a_commit_lands_anyway_once_it_has_waited_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(commit_module, "MAX_WAIT_S", 0.05)
    function = _copy(post)
    function.__code__ = _blocking.__code__
    inside, leave = threading.Event(), threading.Event()
    thread = threading.Thread(target=function, args=(inside, leave))
    thread.start()
    assert inside.wait(10)
    commit = Commit()
    commit.swap_code(function, _other_blocking.__code__)
    started = time.monotonic()
    commit.run()
    waited = time.monotonic() - started
    leave.set()
    thread.join(10)
    assert function.__code__ is _other_blocking.__code__ and waited >= 0.05


def _blocking(inside: threading.Event, leave: threading.Event) -> str:
    inside.set()
    leave.wait(10)
    return "blocking"


def _other_blocking(inside: threading.Event, leave: threading.Event) -> str:
    return "other"


def _copy(function: FunctionType) -> FunctionType:
    return FunctionType(function.__code__, function.__globals__, function.__name__)


def test_a_change_that_fails_mid_step_is_undone_and_raises_naming_the_commit() -> None:
    namespace: dict[str, object] = {"LIMIT": 8192}
    function = _copy(post)
    record: list[str] = []

    def closure() -> object:
        return namespace

    commit = Commit(label="r.yaml: PR 7")
    commit.set_item(namespace, "LIMIT", 4096)
    commit.swap_code(function, closure.__code__)  # a free variable: CPython refuses it
    commit.on_abort(lambda: record.append("aborted"))
    with pytest.raises(PatchApplicationError) as caught:
        commit.run()
    assert str(caught.value) == (
        "r.yaml: PR 7: the changes could not be made in one step (ValueError: post() requires "
        "a code object with 0 free vars, not 1); nothing was changed"
    )
    assert namespace == {"LIMIT": 8192} and function() == "post" and record == ["aborted"]

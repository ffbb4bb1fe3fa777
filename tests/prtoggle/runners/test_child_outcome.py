"""Tests for prtoggle.runners.child_outcome: exit classes and the last exception of a child."""

from __future__ import annotations

import pytest

from prtoggle.runners.child_outcome import classify_exit, last_exception, output_tail
from prtoggle.runners.child_process import CommandRun


def finished(returncode: int | None, stderr: str = "", stdout: str = "") -> CommandRun:
    return CommandRun(("cmd",), returncode, 0.5, stdout, stderr)


@pytest.mark.parametrize(
    ("returncode", "expected"),
    [
        (0, "good"),
        (1, "bad"),
        (2, "bad"),
        (124, "bad"),
        (125, "skip"),
        (127, "bad"),
        (128, "crash"),
        (134, "crash"),
        (-11, "crash"),
        (255, "crash"),
    ],
)
def test_classify_exit_reads_codes_like_git_bisect_run(returncode: int, expected: str) -> None:
    assert classify_exit(finished(returncode)) == expected


def test_classify_exit_counts_a_failed_revert_as_skip() -> None:
    stderr = (
        'Traceback (most recent call last):\n  File "x", line 1\n'
        "prtoggle.errors.PatchApplicationError: edit 1 of PR 26521 matches nothing\n"
    )
    assert classify_exit(finished(1, stderr)) == "skip"


def test_last_exception_finds_the_final_traceback_line() -> None:
    stderr = "noise\nTraceback:\nValueError: first\nduring handling\nIndexError: index 9 out\nbye\n"
    assert last_exception(stderr) == ("IndexError", "index 9 out")
    assert last_exception("nothing here") == (None, "")


def test_classify_exit_counts_a_start_up_revert_failure_as_skip() -> None:
    stderr = "prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: PR 1 is not registered\n"
    assert classify_exit(finished(78, stderr)) == "skip"


def test_output_tail_keeps_the_last_characters_of_stdout_then_stderr() -> None:
    run = finished(1, stderr="err-end\n\n", stdout="out-start ")
    assert output_tail(run, chars=11) == "art err-end"

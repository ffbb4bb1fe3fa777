"""Tests for prtoggle.runners.child_process: child runs, timeouts, signals and exit classes."""

from __future__ import annotations

import sys
import textwrap

import pytest

from prtoggle.errors import RunnerError
from prtoggle.runners.child_process import (
    CommandRun,
    classify_exit,
    last_exception,
    run_child,
)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def finished(returncode: int | None, stderr: str = "", timeout: float | None = None) -> CommandRun:
    return CommandRun(("cmd",), returncode, 0.5, "", stderr, timeout=timeout)


def test_run_command_captures_output_and_status() -> None:
    run = run_child(python("import sys; print('out'); sys.stderr.write('err'); sys.exit(3)"))
    assert (run.returncode, run.stdout, run.stderr) == (3, "out\n", "err")
    assert not run.timed_out


def test_run_command_kills_the_child_after_the_timeout() -> None:
    run = run_child(python("import time; time.sleep(60)"), timeout=0.5)
    assert run.timed_out
    assert run.returncode is None
    assert run.shell_exit_code() == 124
    assert classify_exit(run) == "timeout"


def test_run_command_reports_a_signal_like_a_shell() -> None:
    run = run_child(python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    assert run.returncode == -9
    assert run.signal_name == "SIGKILL"
    assert run.shell_exit_code() == 137
    assert classify_exit(run) == "crash"


def test_run_command_names_a_missing_program() -> None:
    with pytest.raises(RunnerError, match=r"^cannot run 'no-such-program-xyz': No such file"):
        run_child(["no-such-program-xyz"])


def test_run_command_refuses_an_empty_command() -> None:
    with pytest.raises(RunnerError) as excinfo:
        run_child([])
    assert str(excinfo.value) == (
        "no command given: expected a program and its arguments after `--`"
    )


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

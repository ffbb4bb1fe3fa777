"""Tests for prtoggle.runners.child_process: child runs, timeouts and signals."""

from __future__ import annotations

import sys
import textwrap

import pytest

from prtoggle.errors import RunnerError
from prtoggle.runners.child_outcome import classify_exit
from prtoggle.runners.child_process import run_child


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


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

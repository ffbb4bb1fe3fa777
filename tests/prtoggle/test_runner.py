"""Tests for prtoggle.runner: child processes, timeouts, exit classes and the scenario protocol."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from prtoggle.errors import RunnerError
from prtoggle.runner import (
    DETECTION_ENV,
    CommandRun,
    classify_exit,
    classify_scenario,
    last_exception,
    run_command,
    run_scenario,
    scenario_command,
    scenario_env,
)

PROTOCOL_SCENARIO = """
import json, os, sys
if os.environ.get("SGLANG_SPEC_NAN_DETECTION") != "1":
    sys.stderr.write("detection env missing\\n")
    sys.exit(3)
if "--fail" in os.environ.get("FAKE_SCENARIO_MODE", ""):
    sys.stderr.write("NaNDetected at attn.out[step=0]: 12 NaN\\n")
    outcome = {"outcome": "failure", "error": "NaNDetected", "site": "attn.out[step=0]",
               "message": "12 NaN"}
    sys.stderr.write("prtoggle-outcome: " + json.dumps(outcome) + "\\n")
    sys.exit(1)
outcome = {"outcome": "clean", "error": None, "site": None, "message": "matches reference"}
sys.stderr.write("prtoggle-outcome: " + json.dumps(outcome) + "\\n")
"""


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def finished(returncode: int | None, stderr: str = "", timeout: float | None = None) -> CommandRun:
    return CommandRun(("cmd",), returncode, 0.5, "", stderr, timeout=timeout)


@pytest.fixture
def scenario_path(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "fake_scenario.py").write_text(PROTOCOL_SCENARIO)
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


def test_run_command_captures_output_and_status() -> None:
    run = run_command(python("import sys; print('out'); sys.stderr.write('err'); sys.exit(3)"))
    assert (run.returncode, run.stdout, run.stderr) == (3, "out\n", "err")
    assert not run.timed_out


def test_run_command_kills_the_child_after_the_timeout() -> None:
    run = run_command(python("import time; time.sleep(60)"), timeout=0.5)
    assert run.timed_out
    assert run.returncode is None
    assert run.shell_exit_code() == 124
    assert classify_exit(run) == "timeout"


def test_run_command_reports_a_signal_like_a_shell() -> None:
    run = run_command(python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    assert run.returncode == -9
    assert run.signal_name == "SIGKILL"
    assert run.shell_exit_code() == 137
    assert classify_exit(run) == "crash"


def test_run_command_names_a_missing_program() -> None:
    with pytest.raises(RunnerError, match=r"^cannot run 'no-such-program-xyz': No such file"):
        run_command(["no-such-program-xyz"])


def test_run_command_refuses_an_empty_command() -> None:
    with pytest.raises(RunnerError) as excinfo:
        run_command([])
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


def test_scenario_command_passes_device_and_provider() -> None:
    assert scenario_command("fixes.scenarios.x", device="cuda", provider="triton") == [
        sys.executable,
        "-m",
        "fixes.scenarios.x",
        "--device",
        "cuda",
        "--provider",
        "triton",
    ]
    assert scenario_command("m", device="cpu", provider=None)[-2:] == ["--device", "cpu"]


def test_scenario_env_turns_detection_on_and_clears_an_inherited_revert() -> None:
    env = scenario_env((), base={"SGLANG_DEBUG_REVERT_PR": "26521", "KEEP": "1"})
    assert env == {"KEEP": "1", **DETECTION_ENV}


def test_run_scenario_reads_a_clean_protocol_line(scenario_path: dict[str, str]) -> None:
    result = run_scenario("fake_scenario", base_env=scenario_path, timeout=60)
    assert result.kind == "clean"
    assert result.outcome == "clean"
    assert result.message == "matches reference"
    assert result.describe() == "clean"


def test_run_scenario_reads_a_named_failure(scenario_path: dict[str, str]) -> None:
    env = {**scenario_path, "FAKE_SCENARIO_MODE": "--fail"}
    result = run_scenario("fake_scenario", base_env=env, timeout=60)
    assert (result.kind, result.error, result.site) == (
        "failure",
        "NaNDetected",
        "attn.out[step=0]",
    )
    assert result.failure_text() == "NaNDetected at attn.out[step=0]: 12 NaN"
    assert result.describe() == "NaNDetected at attn.out[step=0]"
    assert result.to_dict()["outcome"] == "failure"


def test_classify_scenario_without_protocol_line_uses_the_last_exception() -> None:
    stderr = "Traceback (most recent call last):\nRuntimeError: CUDA error: illegal memory access\n"
    result = classify_scenario(finished(1, stderr), module="m")
    assert (result.kind, result.error, result.message) == (
        "crash",
        "RuntimeError",
        "CUDA error: illegal memory access",
    )


def test_classify_scenario_names_the_killing_signal() -> None:
    result = classify_scenario(finished(-11), module="m")
    assert (result.kind, result.error, result.message) == ("crash", "SIGSEGV", "killed by SIGSEGV")


def test_classify_scenario_reports_a_timeout() -> None:
    result = classify_scenario(finished(None, timeout=30), module="m")
    assert result.kind == "timeout"
    assert result.describe() == "timeout after 30 s"
    assert result.outcome == "failure"


def test_classify_scenario_refuses_a_malformed_protocol_line() -> None:
    with pytest.raises(RunnerError) as excinfo:
        classify_scenario(finished(1, "prtoggle-outcome: {not json\n"), module="fixes.scenarios.x")
    assert str(excinfo.value).startswith(
        "scenario fixes.scenarios.x: malformed outcome line prtoggle-outcome: '{not json': "
    )


def test_classify_exit_counts_a_start_up_revert_failure_as_skip() -> None:
    stderr = "prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: PR 1 is not registered\n"
    assert classify_exit(finished(78, stderr)) == "skip"

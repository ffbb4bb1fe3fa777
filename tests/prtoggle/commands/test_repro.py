"""Tests for commands.repro: scenario children, their outcome line, and the child command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from prtoggle.commands.repro import classify_scenario, run_scenario, scenario_env
from prtoggle.errors import RunnerError
from prtoggle.protocol import DETECTION_ENV
from prtoggle.runners.child_process import CommandRun

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


def finished(returncode: int | None, stderr: str = "", timeout: float | None = None) -> CommandRun:
    return CommandRun(("cmd",), returncode, 0.5, "", stderr, timeout=timeout)


@pytest.fixture
def scenario_path(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "fake_scenario.py").write_text(PROTOCOL_SCENARIO)
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


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

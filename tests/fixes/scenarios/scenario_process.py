"""Helpers for scenario tests: a clean detection state, reverted runs, `python -m` runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import prtoggle
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome, failure_from_exception
from prtoggle.detect import config
from prtoggle.detect.findings.checking import reset_process_state
from prtoggle.protocol import DETECTION_ENV
from prtoggle.recipes.registry import load_registry

REPO_ROOT = Path(__file__).resolve().parents[3]
DETECTION_VARIABLES = tuple(DETECTION_ENV)
SCENARIO_TIMEOUT_S = 300


def isolate_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fresh witness tables, redzones, clock and mode; no detection or revert env.

    Detection state is reset now, by its public reset (every test that uses it resets it
    first); the variables come back after the test (monkeypatch)."""
    reset_process_state()
    clear_detection_env(monkeypatch)


def clear_detection_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every detection variable, the revert variable and the detection mode."""
    for name in (*DETECTION_VARIABLES, "SGLANG_DEBUG_REVERT_PR", config.MODE_ENV):
        monkeypatch.delenv(name, raising=False)


def run_reverted(run: Callable[[ScenarioOptions], ScenarioOutcome], pr: int) -> ScenarioOutcome:
    """`run(ScenarioOptions())` with fix `pr` reverted; a raised failure becomes its outcome."""
    with prtoggle.reverted(pr):
        try:
            return run(ScenarioOptions())
        except Exception as exc:  # a scenario may raise its failure
            return failure_from_exception(exc)


def run_child(module: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m module args` with `env` over this process's env minus detection variables."""
    full_env = {k: v for k, v in os.environ.items() if k not in DETECTION_VARIABLES}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env={**full_env, **env},
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_S,
        check=False,
    )


def detection_on(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in DETECTION_ENV.items():
        monkeypatch.setenv(name, value)


def run_module(
    module: str, *, revert: int | None, detection: bool = True, extra_args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`[SGLANG_DEBUG_REVERT_PR=N] python -m module`, detection env on unless told."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in DETECTION_ENV and k != "SGLANG_DEBUG_REVERT_PR"
    }
    if detection:
        env.update(DETECTION_ENV)
    if revert is not None:
        env["SGLANG_DEBUG_REVERT_PR"] = str(revert)
    return subprocess.run(
        [sys.executable, "-m", module, *extra_args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_S,
        check=False,
    )


def failure_line(stderr: str) -> str:
    """The `<ErrorType>[ at <site>]: <message>` line, just above the outcome line."""
    lines = stderr.rstrip("\n").splitlines()
    assert lines[-1].startswith("prtoggle-outcome: "), stderr[-2000:]
    return lines[-2]


def assert_matches_expect(pr: int, stderr: str) -> None:
    expect = load_registry().get(pr, collection="fixes").expect
    assert expect is not None
    line = failure_line(stderr)
    assert re.search(expect, line), f"{expect!r} does not match {line!r}"

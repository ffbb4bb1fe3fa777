"""Helpers for scenario tests: a clean detection state, and a scenario run as `python -m`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from prtoggle.detect import clock, config, poison, witness
from prtoggle.registry import load_registry

REPO_ROOT = Path(__file__).resolve().parents[3]
DETECTION_ENV = {
    config.NAN_DETECTION_ENV: "1",
    config.OOB_DETECTION_ENV: "1",
    config.POISON_ENV: "1",
}
SCENARIO_TIMEOUT_S = 300


def isolate_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fresh witness tables, redzones, clock and mode; no detection or revert env."""
    monkeypatch.setattr(witness, "_DEFAULT", witness.WitnessRegistry())
    monkeypatch.setattr(poison, "_REGISTRY", poison.RedzoneRegistry())
    monkeypatch.setattr(clock, "_CLOCK", clock.Clock())
    monkeypatch.setattr(config, "_OVERRIDE", config._ModeOverride())
    for name in (*DETECTION_ENV, config.MODE_ENV, "SGLANG_DEBUG_REVERT_PR"):
        monkeypatch.delenv(name, raising=False)


def detection_on(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in DETECTION_ENV.items():
        monkeypatch.setenv(name, value)


def run_module(module: str, *, revert: int | None, detection: bool = True,
               extra_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`[SGLANG_DEBUG_REVERT_PR=N] python -m module`, detection env on unless told."""
    env = {k: v for k, v in os.environ.items()
           if k not in DETECTION_ENV and k != "SGLANG_DEBUG_REVERT_PR"}
    if detection:
        env.update(DETECTION_ENV)
    if revert is not None:
        env["SGLANG_DEBUG_REVERT_PR"] = str(revert)
    return subprocess.run(
        [sys.executable, "-m", module, *extra_args], cwd=REPO_ROOT, env=env,
        capture_output=True, text=True, timeout=SCENARIO_TIMEOUT_S, check=False,
    )


def failure_line(stderr: str) -> str:
    """The `<ErrorType>[ at <site>]: <message>` line, just above the outcome line."""
    lines = stderr.rstrip("\n").splitlines()
    assert lines[-1].startswith("prtoggle-outcome: "), stderr[-2000:]
    return lines[-2]


def assert_matches_expect(pr: int, stderr: str) -> None:
    expect = load_registry().get(pr).expect
    assert expect is not None
    line = failure_line(stderr)
    assert re.search(expect, line), f"{expect!r} does not match {line!r}"

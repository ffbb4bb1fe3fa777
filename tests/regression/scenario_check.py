"""Run a fix's scenario in-process with detection on, raising its failure as an exception."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome, failure_from_exception
from prtoggle.protocol import DETECTION_ENV


class ScenarioFailure(AssertionError):
    """A scenario that was not clean, as `<error> at <site>: <message>` (what `expect` reads)."""


def run_clean(
    run: Callable[[ScenarioOptions], ScenarioOutcome],
    *,
    device: str,
    monkeypatch: pytest.MonkeyPatch,
) -> ScenarioOutcome:
    """Run with NaN/OOB detection and poisoning on; raise unless the outcome is clean.

    The kernel provider is the device's default (torch on CPU, triton on CUDA).
    """
    for name, value in DETECTION_ENV.items():
        monkeypatch.setenv(name, value)
    try:
        outcome = run(ScenarioOptions(device=device))
    except Exception as exc:  # a crash is a failure to report, as the scenario entry does
        outcome = failure_from_exception(exc)
    if outcome.outcome != "clean":
        where = f" at {outcome.site}" if outcome.site else ""
        raise ScenarioFailure(f"{outcome.error}{where}: {outcome.message}")
    return outcome

"""Fresh detection state (tables, redzones, clock, mode, env) for every detect test."""

from __future__ import annotations

import pytest

from prtoggle.detect import config

DETECT_ENV = (
    config.NAN_DETECTION_ENV,
    config.OOB_DETECTION_ENV,
    config.POISON_ENV,
    config.MODE_ENV,
    config.SGLANG_ASYNC_ASSERT_ENV,
    config.SGLANG_NAN_LOGITS_ENV,
    config.SGLANG_INVARIANT_ENV,
)


@pytest.fixture(autouse=True)
def fresh_detect_state(monkeypatch: pytest.MonkeyPatch, fresh_detection_state: None) -> None:
    """Isolate each test from the process-wide detection state and the caller's env."""
    for name in DETECT_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def detection_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn the NaN/Inf and range probes on."""
    monkeypatch.setenv(config.NAN_DETECTION_ENV, "1")
    monkeypatch.setenv(config.OOB_DETECTION_ENV, "1")

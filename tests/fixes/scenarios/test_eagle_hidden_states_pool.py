"""Scenario #22832: clean when fixed; reverted, the stale graph buffers are named or crash."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

import prtoggle
from fixes.scenarios.common import (
    OUTCOME_PREFIX,
    ScenarioOptions,
    ScenarioOutcome,
    failure_from_exception,
)
from fixes.scenarios.eagle_hidden_states_pool import run
from prtoggle import detect
from prtoggle.registry import default_registry

PR = 22832
MODULE = "fixes.scenarios.eagle_hidden_states_pool"
DETECTION = ("SGLANG_SPEC_NAN_DETECTION", "SGLANG_SPEC_OOB_DETECTION", "SGLANG_DEBUG_POISON")


@pytest.fixture(autouse=True)
def no_detection(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (*DETECTION, "SGLANG_DEBUG_REVERT_PR", "PRTOGGLE_DETECT_MODE"):
        monkeypatch.delenv(name, raising=False)
    yield
    detect.reset()


def run_reverted() -> ScenarioOutcome:
    with prtoggle.reverted(PR):
        try:
            return run(ScenarioOptions())
        except Exception as exc:  # a scenario may raise its failure
            return failure_from_exception(exc)


def test_fixed_run_is_clean_and_matches_the_reference() -> None:
    assert run(ScenarioOptions()) == ScenarioOutcome(
        outcome="clean",
        message="hidden-state pool matches the reference after a graph batch of 2 and an "
        "eager batch of 4 (torch)",
    )


def test_fixed_run_is_clean_with_every_detector_on(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in DETECTION:
        monkeypatch.setenv(name, "1")
    assert run(ScenarioOptions()).outcome == "clean"


def test_reverted_without_detection_fails_reading_past_the_graph_buffer() -> None:
    assert run_reverted() == ScenarioOutcome(
        outcome="failure", error="IndexError", site=None,
        message="assign_hidden_states_pool: reads 4 entries of req_pool_indices, whose "
        "allocation holds 2 (tensor length 2); the real kernel would read unowned memory",
    )


def test_reverted_with_detection_names_the_req_pool_indices_length(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in DETECTION:
        monkeypatch.setenv(name, "1")
    outcome = run_reverted()
    assert (outcome.error, outcome.site) == (
        "OOBDetected", "multi_layer_eagle.assign_hidden_states_pool.req_pool_indices.len"
    )
    assert "value 4 outside [0, 3)" in outcome.message


def test_reverted_with_poisoning_only_reads_redzone_bytes_as_pool_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_DEBUG_POISON", "1")
    outcome = run_reverted()
    assert outcome.error == "IndexError"
    assert outcome.message.startswith("assign_hidden_states_pool: pool row ")
    assert outcome.message.endswith(
        " outside [0, 8) (req_pool_indices); the real kernel would write unowned memory"
    )


def child(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in DETECTION}
    return subprocess.run([sys.executable, "-m", MODULE, *args], env={**full_env, **env},
                          capture_output=True, text=True, timeout=300, check=False)


def test_reverted_child_exits_1_with_the_yaml_expect() -> None:
    result = child({"SGLANG_DEBUG_REVERT_PR": str(PR), **dict.fromkeys(DETECTION, "1")})
    assert result.returncode == 1
    expect = default_registry().get(PR).expect
    assert expect is not None
    assert re.search(expect, result.stderr), result.stderr[-2000:]
    assert result.stderr.splitlines()[-1].startswith(OUTCOME_PREFIX)


@pytest.mark.gpu
def test_on_cuda_fixed_is_clean_and_reverted_matches_the_expect() -> None:
    fixed = child({}, "--device", "cuda")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    reverted = child({"SGLANG_DEBUG_REVERT_PR": str(PR), **dict.fromkeys(DETECTION, "1")},
                     "--device", "cuda")
    assert reverted.returncode == 1
    expect = default_registry().get(PR).expect
    assert expect is not None
    assert re.search(expect, reverted.stderr), reverted.stderr[-2000:]


@pytest.mark.gpu
def test_on_cuda_reverted_without_detection_fails_or_crashes() -> None:
    result = child({"SGLANG_DEBUG_REVERT_PR": str(PR)}, "--device", "cuda")
    assert result.returncode != 0, result.stderr[-2000:]

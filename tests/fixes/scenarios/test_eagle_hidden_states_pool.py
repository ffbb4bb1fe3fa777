"""Scenario #22832: clean when fixed; reverted, the stale graph buffers are named or crash."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest
from scenario_process import (
    DETECTION_VARIABLES,
    clear_detection_env,
    detection_on,
    run_child,
    run_reverted,
)

from fixes.scenarios.common import OUTCOME_PREFIX, ScenarioOptions, ScenarioOutcome
from fixes.scenarios.eagle_hidden_states_pool import run
from prtoggle import detect
from prtoggle.recipes.registry import default_registry

PR = 22832
MODULE = "fixes.scenarios.eagle_hidden_states_pool"


@pytest.fixture(autouse=True)
def no_detection(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    clear_detection_env(monkeypatch)
    yield
    detect.reset()


def test_fixed_run_is_clean_and_matches_the_reference() -> None:
    assert run(ScenarioOptions()) == ScenarioOutcome(
        outcome="clean",
        message="hidden-state pool matches the reference after a graph batch of 2 and an "
        "eager batch of 4 (torch)",
    )


def test_fixed_run_is_clean_with_every_detector_on(monkeypatch: pytest.MonkeyPatch) -> None:
    detection_on(monkeypatch)
    assert run(ScenarioOptions()).outcome == "clean"


def test_reverted_without_detection_fails_reading_past_the_graph_buffer() -> None:
    assert run_reverted(run, PR) == ScenarioOutcome(
        outcome="failure",
        error="IndexError",
        site=None,
        message="assign_hidden_states_pool: reads 4 entries of req_pool_indices, whose "
        "allocation holds 2 (tensor length 2); the real kernel would read unowned memory",
    )


def test_reverted_with_detection_names_the_req_pool_indices_length(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    detection_on(monkeypatch)
    outcome = run_reverted(run, PR)
    assert (outcome.error, outcome.site) == (
        "OOBDetected",
        "multi_layer_eagle.assign_hidden_states_pool.req_pool_indices.len",
    )
    assert "value 4 outside [0, 3)" in outcome.message


def test_reverted_with_poisoning_only_names_the_read_of_the_graph_buffer_redzone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_DEBUG_POISON", "1")
    outcome = run_reverted(run, PR)
    assert (outcome.error, outcome.site) == (
        "RedzoneRead",
        "draft_extend_graph[step=2].req_pool_indices",
    )
    assert outcome.message == (
        "1 site hit: redzone of buffer draft_extend_graph[step=2].req_pool_indices: 16 bytes "
        "read by assign_hidden_states_pool: req_pool_indices[:4], first at byte 0 past its end "
        "(16-byte buffer on cpu)"
    )


def child(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_child(MODULE, env, *args)


def test_reverted_child_exits_1_with_the_yaml_expect() -> None:
    result = child({"SGLANG_DEBUG_REVERT_PR": str(PR), **dict.fromkeys(DETECTION_VARIABLES, "1")})
    assert result.returncode == 1
    expect = default_registry().get(PR, collection="fixes").expect
    assert expect is not None
    assert re.search(expect, result.stderr), result.stderr[-2000:]
    assert result.stderr.splitlines()[-1].startswith(OUTCOME_PREFIX)


@pytest.mark.gpu
def test_on_cuda_fixed_is_clean_and_reverted_matches_the_expect() -> None:
    fixed = child({}, "--device", "cuda")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    reverted = child(
        {"SGLANG_DEBUG_REVERT_PR": str(PR), **dict.fromkeys(DETECTION_VARIABLES, "1")},
        "--device",
        "cuda",
    )
    assert reverted.returncode == 1
    expect = default_registry().get(PR, collection="fixes").expect
    assert expect is not None
    assert re.search(expect, reverted.stderr), reverted.stderr[-2000:]


@pytest.mark.gpu
def test_on_cuda_reverted_without_detection_fails_or_crashes() -> None:
    result = child({"SGLANG_DEBUG_REVERT_PR": str(PR)}, "--device", "cuda")
    assert result.returncode != 0, result.stderr[-2000:]

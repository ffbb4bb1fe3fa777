"""Tests for the #26521 scenario: draft-decode CUDA graph capture with the capture-time copy."""

from __future__ import annotations

import re

import pytest
from scenario_process import (
    assert_matches_expect,
    detection_on,
    failure_line,
    isolate_detection,
    run_module,
)

import prtoggle
from fixes.scenarios import trtllm_draft_decode_capture as scenario
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome
from prtoggle.errors import NaNDetected, OOBDetected

MODULE = "fixes.scenarios.trtllm_draft_decode_capture"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_detection(monkeypatch)


def test_fixed_run_is_clean_with_every_probe_on(monkeypatch: pytest.MonkeyPatch) -> None:
    detection_on(monkeypatch)
    assert scenario.run(ScenarioOptions()) == ScenarioOutcome(
        outcome="clean",
        message="captured bs [1, 2, 4], replayed bs=3 for 3 draft steps; matches the dense "
        "reference",
    )


def test_reverted_run_names_the_nan_of_draft_step_zero_at_capture_warmup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_SPEC_NAN_DETECTION", "1")
    with prtoggle.reverted(26521), pytest.raises(NaNDetected) as caught:
        scenario.run(ScenarioOptions())
    assert str(caught.value).startswith(
        "6 sites hit, in first-hit order: nan at trtllm_mha.draft_decode[step=0].layer[0].output: "
        "768 elements in rows 0..3, first hit in phase capture-warmup at step 0"
    )


def test_reverted_run_names_the_empty_kv_range_with_range_probes_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_SPEC_OOB_DETECTION", "1")
    with prtoggle.reverted(26521), pytest.raises(OOBDetected) as caught:
        scenario.run(ScenarioOptions())
    assert str(caught.value).startswith(
        "3 sites hit, in first-hit order: oob at trtllm_mha.draft_decode[step=0].cache_seq_lens: "
        "12 elements in rows 0..3, value 0 outside [1, 65), first hit in phase capture-warmup"
    )


def test_reverted_run_without_detection_leaves_nan_in_the_padding_page() -> None:
    with prtoggle.reverted(26521):
        outcome = scenario.run(ScenarioOptions())
    assert outcome == ScenarioOutcome(
        outcome="failure",
        error="MismatchWithReference",
        site="kv_pool.layer[1].padding_page",
        message="non-finite K/V written into the padding page (capture-time draft decode "
        "produced NaN)",
    )


def test_reverted_process_fails_as_the_yaml_expects_and_fixed_process_is_clean() -> None:
    reverted = run_module(MODULE, revert=26521)
    assert reverted.returncode == 1, reverted.stderr[-2000:]
    assert_matches_expect(26521, reverted.stderr)
    assert re.match(r"OOBDetected\b.*phase capture-warmup", failure_line(reverted.stderr))
    fixed = run_module(MODULE, revert=None)
    assert fixed.returncode == 0, fixed.stderr[-2000:]


@pytest.mark.gpu
def test_on_cuda_reverted_capture_is_named_and_fixed_is_clean() -> None:
    # Real CUDA graphs: only the Triton provider is capturable (the torch reference and
    # flashinfer's planning synchronise with the host).
    args = ("--device", "cuda", "--provider", "triton")
    reverted = run_module(MODULE, revert=26521, extra_args=args)
    assert reverted.returncode == 1, reverted.stderr[-3000:]
    assert_matches_expect(26521, reverted.stderr)
    assert "phase capture-warmup" in failure_line(reverted.stderr)
    fixed = run_module(MODULE, revert=None, extra_args=args)
    assert fixed.returncode == 0, fixed.stderr[-3000:]

"""Tests for the #24856 scenario: draft extend with unequal accept lengths on the context kernel."""

from __future__ import annotations

import re

import pytest
from scenario_process import assert_matches_expect, detection_on, isolate_detection, run_module

import prtoggle
from fixes.scenarios import trtllm_draft_extend_routing as scenario
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome
from prtoggle.errors import OOBDetected

MODULE = "fixes.scenarios.trtllm_draft_extend_routing"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_detection(monkeypatch)


def test_fixed_run_is_clean_with_every_probe_on(monkeypatch: pytest.MonkeyPatch) -> None:
    detection_on(monkeypatch)
    assert scenario.run(ScenarioOptions()) == ScenarioOutcome(
        outcome="clean",
        message="target verify (4 tokens/request) and draft extend (accept lengths "
        "[1, 3, 2, 4]) match the dense reference",
    )


def test_reverted_run_names_the_decode_query_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_SPEC_OOB_DETECTION", "1")
    with prtoggle.reverted(24856), pytest.raises(OOBDetected) as caught:
        scenario.run(ScenarioOptions())
    assert str(caught.value) == (
        "1 site hit: oob at trtllm_mha.forward_extend.decode_query_rows: 1 element, value 16 "
        "outside [0, 11), first hit in phase eager at step 0, lowest flat index 0"
    )


def test_reverted_run_without_detection_reads_past_the_query() -> None:
    with (
        prtoggle.reverted(24856),
        pytest.raises(
            IndexError,
            match=re.escape("trtllm decode: index 10 is out of bounds for query with 10 rows"),
        ),
    ):
        scenario.run(ScenarioOptions())


def test_reverted_process_fails_as_the_yaml_expects_and_fixed_process_is_clean() -> None:
    reverted = run_module(MODULE, revert=24856)
    assert reverted.returncode == 1, reverted.stderr[-2000:]
    assert_matches_expect(24856, reverted.stderr)
    fixed = run_module(MODULE, revert=None)
    assert fixed.returncode == 0, fixed.stderr[-2000:]


@pytest.mark.gpu
@pytest.mark.parametrize("provider", ["triton", "torch"])
def test_on_cuda_reverted_routing_is_named_and_fixed_is_clean(provider: str) -> None:
    args = ("--device", "cuda", "--provider", provider)
    reverted = run_module(MODULE, revert=24856, extra_args=args)
    assert reverted.returncode == 1, reverted.stderr[-3000:]
    assert_matches_expect(24856, reverted.stderr)
    fixed = run_module(MODULE, revert=None, extra_args=args)
    assert fixed.returncode == 0, fixed.stderr[-3000:]

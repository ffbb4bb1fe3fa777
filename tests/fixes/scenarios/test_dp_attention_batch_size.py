"""Tests for the #21649 scenario: two DP ranks (gloo on CPU, nccl on two GPUs), the smaller
batch padded after metadata."""

from __future__ import annotations

import pytest
import torch
from scenario_process import assert_matches_expect, detection_on, isolate_detection, run_module

import prtoggle
from fixes.errors import EngineUsageError
from fixes.scenarios import dp_attention_batch_size as scenario
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome

MODULE = "fixes.scenarios.dp_attention_batch_size"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_detection(monkeypatch)


def test_fixed_ranks_are_clean_with_every_probe_on(monkeypatch: pytest.MonkeyPatch) -> None:
    detection_on(monkeypatch)
    assert scenario.run(ScenarioOptions()) == ScenarioOutcome(
        outcome="clean",
        message="rank 0: batch 2 padded to 4 (batch sizes per rank [2, 4]); matches the "
        "reference; rank 1: batch 4 padded to 4 (batch sizes per rank [2, 4]); matches the "
        "reference",
    )


def test_reverted_in_parent_reaches_the_ranks_and_names_the_batch_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_SPEC_OOB_DETECTION", "1")
    with prtoggle.reverted(21649):
        outcome = scenario.run(ScenarioOptions())
    assert (outcome.outcome, outcome.error) == ("failure", "OOBDetected")
    assert outcome.message == (
        "1 site hit: oob at trtllm_mha.forward_extend.batch_size: 1 element, value 4 outside "
        "[0, 3), first hit in phase eager at step 0, lowest flat index 0"
    )


def test_reverted_process_fails_as_the_yaml_expects() -> None:
    reverted = run_module(MODULE, revert=21649)
    assert reverted.returncode == 1, reverted.stderr[-2000:]
    assert_matches_expect(21649, reverted.stderr)


@pytest.mark.gpu
def test_on_cuda_reverted_batch_size_is_named_and_fixed_is_clean() -> None:
    args = ("--device", "cuda")
    reverted = run_module(MODULE, revert=21649, extra_args=args)
    assert reverted.returncode == 1, reverted.stderr[-3000:]
    assert_matches_expect(21649, reverted.stderr)
    fixed = run_module(MODULE, revert=None, extra_args=args)
    assert fixed.returncode == 0, fixed.stderr[-3000:]


def test_auto_backend_is_gloo_without_a_gpu_per_rank() -> None:
    assert scenario.collective_backend(ScenarioOptions(), world_size=2) == "gloo"
    assert scenario.collective_backend(ScenarioOptions(dist_backend="gloo"), world_size=2) == (
        "gloo"
    )


def test_nccl_without_a_gpu_per_rank_is_refused_with_the_choices() -> None:
    with pytest.raises(EngineUsageError) as caught:
        scenario.collective_backend(ScenarioOptions(dist_backend="nccl"), world_size=2)
    assert str(caught.value) == (
        "dp_attention_batch_size: --backend nccl needs --device cuda and 2 GPUs (one per DP "
        "rank), got --device cpu with 0; choices: --backend gloo, or auto (nccl only when "
        "there are enough GPUs)"
    )


def test_the_process_reports_which_backend_each_rank_used() -> None:
    fixed = run_module(MODULE, revert=None, extra_args=("--backend", "gloo"))
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert "dp_rank[0]: gloo process group, device cpu" in fixed.stderr
    assert "dp_rank[1]: gloo process group, device cpu" in fixed.stderr


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs (one per DP rank)")
def test_on_two_gpus_the_ranks_meet_over_nccl_and_the_batch_size_is_named() -> None:
    args = ("--device", "cuda", "--backend", "nccl")
    reverted = run_module(MODULE, revert=21649, extra_args=args)
    assert reverted.returncode == 1, reverted.stderr[-3000:]
    assert_matches_expect(21649, reverted.stderr)
    for rank in (0, 1):
        assert f"dp_rank[{rank}]: nccl process group, device cuda:{rank}" in reverted.stderr
    fixed = run_module(MODULE, revert=None, extra_args=args)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert "dp_rank[1]: nccl process group, device cuda:1" in fixed.stderr

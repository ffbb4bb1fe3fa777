"""Tests for the #22832 fix-cost benchmark: draft extend of a batch the graphs run."""

from __future__ import annotations

import contextlib

import pytest
from bench_support import QUICK, assert_paired, assert_well_formed, clean_env, paired

import prtoggle
from fixes.benchmarks import hidden_states_pool_cost as bench


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


def test_fixed_result_is_well_formed() -> None:
    result = bench.measure(QUICK)
    assert_well_formed(result, name="hidden_states_pool_cost", reverted=[])
    assert result.shape["capture_bs"] == [1, 2, 4]
    assert result.shape["bs"] == 4


def test_reverted_runs_without_failing() -> None:
    with prtoggle.reverted(22832):
        result = bench.measure(QUICK)
    assert_well_formed(result, name="hidden_states_pool_cost", reverted=[22832])


def test_both_variants_pool_the_same_hidden_states_on_a_graph_batch() -> None:
    """A batch the graphs run gives the fixed and the reverted code the same inputs."""
    import torch

    from fixes.cuda_graph.draft_extend_runner import build_draft_extend_graph_runner
    from fixes.model.draft_model import draft_models
    from fixes.speculative.multi_layer_eagle_worker_v2 import MultiLayerEagleWorkerV2

    shape, device = bench.CPU_SHAPE, torch.device("cpu")
    pools = []
    for revert in (False, True):
        models = draft_models(
            num_steps=shape.num_steps,
            hidden_size=shape.hidden_size,
            vocab_size=shape.vocab_size,
            seed=1,
            device=device,
        )
        runner = build_draft_extend_graph_runner(
            models, capture_bs=shape.capture_bs, tokens_per_req=shape.num_steps + 1, topk=shape.topk
        )
        worker = MultiLayerEagleWorkerV2(
            draft_models=models,
            topk=shape.topk,
            pool_rows=shape.bs,
            cuda_graph_runner_for_draft_extend=runner,
        )
        forward_batch, verify = bench.graph_batch(shape, device=device)
        with prtoggle.reverted(22832) if revert else contextlib.nullcontext():
            assert worker._draft_extend_for_decode(forward_batch, verify).used_cuda_graph
        pools.append(worker.req_to_hidden_states_pool)
    assert torch.count_nonzero(pools[0]) > 0
    assert torch.equal(pools[0], pools[1])


def test_a_paired_run_times_the_reverted_code_beside_the_fixed() -> None:
    assert_paired(bench.measure(paired(22832)), name="hidden_states_pool_cost", pr=22832)

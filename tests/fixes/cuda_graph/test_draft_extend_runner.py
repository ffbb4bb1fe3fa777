"""Draft-extend graph runners: replay equals the eager step, padding, can_run, static buffers."""

from __future__ import annotations

import pytest
import torch

from fixes.cuda_graph.draft_extend_runner import (
    build_draft_extend_graph_runner,
    draft_extend_step,
)
from fixes.forward_batch import ForwardBatch, ForwardMode
from fixes.memory_pool import MHATokenToKVPool, ReqToTokenPool
from fixes.model.draft_model import draft_models

CPU = torch.device("cpu")
PER_REQ = 3
HIDDEN = 8


def extend_batch(
    rows: list[int], *, mode: ForwardMode = ForwardMode.DRAFT_EXTEND_V2
) -> ForwardBatch:
    bs = len(rows)
    tokens = bs * PER_REQ
    zeros = torch.zeros(tokens, dtype=torch.int64)
    return ForwardBatch(
        forward_mode=mode,
        batch_size=bs,
        input_ids=zeros,
        req_pool_indices=torch.tensor(rows),
        seq_lens=torch.full((bs,), 9, dtype=torch.int32),
        seq_lens_cpu=torch.full((bs,), 9, dtype=torch.int32),
        out_cache_loc=zeros,
        positions=zeros,
        req_to_token_pool=ReqToTokenPool(size=8, max_context_len=16, device=CPU),
        token_to_kv_pool=MHATokenToKVPool(
            num_pages=2,
            page_size=1,
            num_kv_heads=1,
            head_dim=2,
            num_layers=1,
            dtype=torch.float32,
            device=CPU,
        ),
        extend_seq_lens=torch.full((bs,), PER_REQ, dtype=torch.int32),
        extend_start_loc=torch.arange(0, tokens, PER_REQ, dtype=torch.int32),
    )


@pytest.fixture
def runner_and_models() -> tuple[object, list[object]]:
    models = draft_models(num_steps=2, hidden_size=HIDDEN, vocab_size=16, seed=9, device=CPU)
    runner = build_draft_extend_graph_runner(
        models, capture_bs=(1, 3), tokens_per_req=PER_REQ, topk=2
    )
    return runner, models


@pytest.mark.parametrize("rows", [[4], [2, 5], [0, 6, 1]])
def test_replay_matches_the_eager_step_and_pads_to_the_next_captured_size(
    runner_and_models: tuple, rows: list[int]
) -> None:
    runner, models = runner_and_models
    generator = torch.Generator().manual_seed(len(rows))
    tokens = len(rows) * PER_REQ
    ids = torch.randint(0, 16, (tokens,), generator=generator)
    hidden = torch.randn(tokens, HIDDEN, generator=generator)
    select = torch.arange(len(rows)) * PER_REQ + 1
    replayed = runner.get_runner(1).replay(
        extend_batch(rows), input_ids=ids, hidden_states=hidden, select_index=select
    )
    eager = draft_extend_step(
        models[1],
        input_ids=ids,
        hidden_states=hidden,
        select_index=select,
        tokens_per_req=PER_REQ,
        topk=2,
    )
    torch.testing.assert_close(replayed.hidden_states, eager.hidden_states)
    assert torch.equal(replayed.topk_index, eager.topk_index)
    assert torch.equal(replayed.next_input_ids, eager.next_input_ids)
    buffers = runner.get_runner(1).buffers
    assert buffers.req_pool_indices[: len(rows)].tolist() == rows
    assert buffers.req_pool_indices[len(rows) :].tolist() == [0] * (3 - len(rows))


def test_can_run_only_draft_extend_batches_up_to_the_largest_captured_size(
    runner_and_models: tuple,
) -> None:
    runner, _ = runner_and_models
    assert runner.can_run(extend_batch([0, 1, 2]))
    assert not runner.can_run(extend_batch([0, 1, 2, 3]))
    assert not runner.can_run(extend_batch([0], mode=ForwardMode.EXTEND))


def test_static_buffers_are_sized_for_the_largest_captured_batch(
    runner_and_models: tuple,
) -> None:
    runner, _ = runner_and_models
    last = runner.get_last_runner()
    assert last is runner.get_runner(1)
    assert tuple(last.buffers.hidden_states.shape) == (3 * PER_REQ, HIDDEN)
    assert tuple(last.buffers.req_pool_indices.shape) == (3,)

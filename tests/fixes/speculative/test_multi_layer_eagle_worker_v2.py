"""Multi-layer EAGLE draft extend: graph and eager paths agree; the pool follows the path run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import prtoggle
from fixes.cuda_graph.draft_extend_runner import build_draft_extend_graph_runner
from fixes.forward_batch import ForwardBatch, ForwardMode
from fixes.memory_pool import MHATokenToKVPool, ReqToTokenPool
from fixes.model.draft_model import draft_models, reference_draft_extend
from fixes.speculative.multi_layer_eagle_worker_v2 import MultiLayerEagleWorkerV2, VerifyResult
from prtoggle import detect
from prtoggle.errors import OOBDetected

CPU = torch.device("cpu")
NUM_STEPS = 3
PER_REQ = NUM_STEPS + 1
HIDDEN = 8
VOCAB = 16


@pytest.fixture(autouse=True)
def clean_detection(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("SGLANG_SPEC_NAN_DETECTION", "SGLANG_SPEC_OOB_DETECTION", "SGLANG_DEBUG_POISON"):
        monkeypatch.delenv(name, raising=False)
    detect.reset()
    yield
    detect.reset()


def make_worker(*, with_graphs: bool = True, provider: str = "torch") -> MultiLayerEagleWorkerV2:
    models = draft_models(
        num_steps=NUM_STEPS, hidden_size=HIDDEN, vocab_size=VOCAB, seed=2, device=CPU
    )
    runner = (
        build_draft_extend_graph_runner(models, capture_bs=(1, 2), tokens_per_req=PER_REQ, topk=2)
        if with_graphs
        else None
    )
    return MultiLayerEagleWorkerV2(
        draft_models=models,
        topk=2,
        pool_rows=8,
        cuda_graph_runner_for_draft_extend=runner,
        hidden_states_provider=provider,
    )


def make_batch(
    rows: list[int], accept: list[int], *, seed: int = 0
) -> tuple[ForwardBatch, VerifyResult]:
    bs, generator = len(rows), torch.Generator().manual_seed(seed)
    tokens = bs * PER_REQ
    verify = VerifyResult(
        hidden_states=torch.randn(tokens, HIDDEN, generator=generator),
        next_token_ids=torch.randint(0, VOCAB, (tokens,), generator=generator),
        accept_lens=torch.tensor(accept),
    )
    batch = ForwardBatch(
        forward_mode=ForwardMode.DRAFT_EXTEND_V2,
        batch_size=bs,
        input_ids=verify.next_token_ids,
        req_pool_indices=torch.tensor(rows),
        seq_lens=torch.full((bs,), 9, dtype=torch.int32),
        seq_lens_cpu=torch.full((bs,), 9, dtype=torch.int32),
        out_cache_loc=torch.zeros(tokens, dtype=torch.int64),
        positions=torch.zeros(tokens, dtype=torch.int64),
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
    return batch, verify


def expected_pool(
    worker: MultiLayerEagleWorkerV2, rows: list[int], verify: VerifyResult
) -> torch.Tensor:
    select = torch.arange(len(rows)) * PER_REQ + verify.accept_lens - 1
    last = reference_draft_extend(
        worker.draft_models,
        input_ids=verify.next_token_ids,
        hidden_states=verify.hidden_states,
        select_index=select,
        tokens_per_req=PER_REQ,
    )[-1]
    pool = worker.req_to_hidden_states_pool.clone()
    for index, row in enumerate(rows):
        pool[row] = last.hidden_states[index * PER_REQ + 2 : (index + 1) * PER_REQ]
    return pool


@pytest.mark.parametrize("provider", ["torch", "triton"])
@pytest.mark.parametrize(("rows", "accept"), [([3, 5], [1, 4]), ([0, 2, 4, 7], [2, 3, 1, 4])])
def test_pool_rows_hold_the_last_steps_minus_one_states_of_each_window(
    provider: str, rows: list[int], accept: list[int]
) -> None:
    worker = make_worker(provider=provider)
    batch, verify = make_batch(rows, accept)
    expected = expected_pool(worker, rows, verify)
    result = worker._draft_extend_for_decode(batch, verify)
    assert result.used_cuda_graph == (len(rows) <= 2)
    torch.testing.assert_close(worker.req_to_hidden_states_pool, expected)


def test_graph_and_eager_paths_draft_the_same_tokens() -> None:
    batch, verify = make_batch([1, 6], [3, 2], seed=4)
    graph = make_worker()._draft_extend_for_decode(batch, verify)
    eager = make_worker(with_graphs=False)._draft_extend_for_decode(batch, verify)
    assert graph.used_cuda_graph and not eager.used_cuda_graph
    assert graph.topk_index.shape == (2, NUM_STEPS * 2)
    assert torch.equal(graph.topk_index, eager.topk_index)
    torch.testing.assert_close(graph.topk_p, eager.topk_p)


def test_reverted_22832_pools_a_large_eager_batch_from_the_stale_graph_buffers() -> None:
    worker = make_worker()
    worker._draft_extend_for_decode(*make_batch([3, 5], [1, 4]))
    batch, verify = make_batch([0, 2, 4, 7], [2, 3, 1, 4], seed=1)
    with prtoggle.reverted(22832), pytest.raises(IndexError) as info:
        worker._draft_extend_for_decode(batch, verify)
    assert str(info.value) == (
        "assign_hidden_states_pool: reads 4 entries of req_pool_indices, whose allocation "
        "holds 2 (tensor length 2); the real kernel would read unowned memory"
    )


def test_reverted_22832_is_named_by_the_req_pool_indices_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_SPEC_OOB_DETECTION", "1")
    worker = make_worker()
    batch, verify = make_batch([0, 2, 4, 7], [2, 3, 1, 4], seed=1)
    worker._draft_extend_for_decode(batch, verify)  # fixed: clean
    detect.check()
    with prtoggle.reverted(22832), pytest.raises(OOBDetected) as info:
        worker._draft_extend_for_decode(batch, verify)
    message = str(info.value)
    assert "oob at multi_layer_eagle.assign_hidden_states_pool.req_pool_indices.len" in message
    assert "value 4 outside [0, 3)" in message


def test_without_a_graph_runner_the_pool_is_left_alone() -> None:
    worker = make_worker(with_graphs=False)
    worker._draft_extend_for_decode(*make_batch([1, 2], [1, 1]))
    assert torch.equal(
        worker.req_to_hidden_states_pool, torch.zeros_like(worker.req_to_hidden_states_pool)
    )

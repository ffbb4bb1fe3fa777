"""Tests for the draft-decode graph runner: capture per batch size, padded replay, #26521."""

from __future__ import annotations

import re

import pytest
import torch

import prtoggle
from fixes.attention.trtllm_mha_backend import (
    TRTLLMHAAttnBackend,
    TRTLLMHAAttnMultiStepDraftBackend,
)
from fixes.cuda_graph.draft_decode_runner import DraftDecodeGraphRunner
from fixes.errors import CudaGraphError
from fixes.memory_pool import PADDING_PAGE
from fixes.model.toy_requests import ToyStack, build_stack, random_tokens
from prtoggle.detect import config
from prtoggle.errors import NaNDetected

NUM_STEPS = 2


@pytest.fixture(autouse=True)
def fresh_detect_state(monkeypatch: pytest.MonkeyPatch, fresh_detection_state: None) -> None:
    for name in (
        config.NAN_DETECTION_ENV,
        config.OOB_DETECTION_ENV,
        config.POISON_ENV,
        config.MODE_ENV,
    ):
        monkeypatch.delenv(name, raising=False)


def make_runner(stack: ToyStack, sizes: list[int]) -> DraftDecodeGraphRunner:
    pools = {
        "req_to_token_pool": stack.req_to_token_pool,
        "token_to_kv_pool": stack.token_to_kv_pool,
    }
    return DraftDecodeGraphRunner(
        model=stack.model,
        draft_backend=TRTLLMHAAttnMultiStepDraftBackend(num_steps=NUM_STEPS, **pools),
        capture_batch_sizes=sizes,
        **pools,
    )


def prefilled_stack(prefix_lens: list[int]) -> tuple[ToyStack, list]:
    stack = build_stack(device=torch.device("cpu"))
    backend = TRTLLMHAAttnBackend(
        req_to_token_pool=stack.req_to_token_pool, token_to_kv_pool=stack.token_to_kv_pool
    )
    requests = stack.new_requests(len(prefix_lens))
    batch = stack.extend_batch(requests, random_tokens(prefix_lens, vocab_size=97, seed=3))
    backend.init_forward_metadata(batch)
    stack.model.forward(batch, backend)
    return stack, requests


def test_padded_replay_equals_eager_draft_steps_and_writes_padding_to_page_zero() -> None:
    stack, requests = prefilled_stack([4, 7, 2])
    drafts = random_tokens([NUM_STEPS] * 3, vocab_size=97, seed=4)
    runner = make_runner(stack, [1, 4])
    runner.capture()
    batches = stack.draft_decode_batches(requests, drafts, num_steps=NUM_STEPS)
    graph_out = runner.replay(batches)
    assert graph_out.shape == (NUM_STEPS, 3, stack.model.config.hidden_size)
    assert runner.static_out_cache_loc[:, 3].tolist() == [PADDING_PAGE * 4] * 2
    eager = TRTLLMHAAttnMultiStepDraftBackend(
        req_to_token_pool=stack.req_to_token_pool,
        token_to_kv_pool=stack.token_to_kv_pool,
        num_steps=NUM_STEPS,
    )
    eager_out = []
    for batch, backend in zip(batches, eager.backends, strict=True):
        backend.init_forward_metadata(batch)
        eager_out.append(stack.model.forward(batch, backend))
    torch.testing.assert_close(graph_out, torch.stack(eager_out), atol=1e-5, rtol=0)


def test_replay_refuses_a_batch_larger_than_every_capture_and_a_wrong_step_count() -> None:
    stack, requests = prefilled_stack([3, 3, 3])
    runner = make_runner(stack, [2])
    runner.capture()
    assert (runner.can_run(2), runner.can_run(3)) == (True, False)
    batches = stack.draft_decode_batches(requests, [[1, 2]] * 3, num_steps=NUM_STEPS)
    with pytest.raises(
        CudaGraphError,
        match=re.escape("no captured draft decode graph fits bs=3; captured batch sizes: [2]"),
    ):
        runner.replay(batches)
    with pytest.raises(
        CudaGraphError, match=re.escape("replay got 1 step batches; expected num_steps=2")
    ):
        runner.replay(batches[:1])


def test_capture_with_26521_reverted_reports_nan_at_capture_warmup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(config.NAN_DETECTION_ENV, "1")
    stack, _ = prefilled_stack([3])
    runner = make_runner(stack, [2])
    with prtoggle.reverted(26521), pytest.raises(NaNDetected) as caught:
        runner.capture()
    assert str(caught.value).startswith(
        "4 sites hit, in first-hit order: nan at trtllm_mha.draft_decode[step=0].layer[0].output: "
        "384 elements in rows 0..1, first hit in phase capture-warmup"
    )


@pytest.mark.gpu
def test_cuda_graph_replay_equals_eager_draft_steps_on_cuda() -> None:
    device = torch.device("cuda")
    stack = build_stack(device=device)
    backend = TRTLLMHAAttnBackend(
        req_to_token_pool=stack.req_to_token_pool, token_to_kv_pool=stack.token_to_kv_pool
    )
    requests = stack.new_requests(3)
    batch = stack.extend_batch(requests, random_tokens([4, 7, 2], vocab_size=97, seed=3))
    backend.init_forward_metadata(batch)
    stack.model.forward(batch, backend)
    runner = make_runner(stack, [1, 4])
    runner.capture()
    assert all(graph.graph is not None for graph in runner.graphs.values())
    batches = stack.draft_decode_batches(
        requests, random_tokens([NUM_STEPS] * 3, vocab_size=97, seed=4), num_steps=NUM_STEPS
    )
    graph_out = runner.replay(batches)
    eager = TRTLLMHAAttnMultiStepDraftBackend(
        req_to_token_pool=stack.req_to_token_pool,
        token_to_kv_pool=stack.token_to_kv_pool,
        num_steps=NUM_STEPS,
    )
    eager_out = []
    for step_batch, step_backend in zip(batches, eager.backends, strict=True):
        step_backend.init_forward_metadata(step_batch)
        eager_out.append(stack.model.forward(step_batch, step_backend))
    torch.testing.assert_close(graph_out, torch.stack(eager_out), atol=1e-4, rtol=0)

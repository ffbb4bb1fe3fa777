"""Tests for the TRT-LLM MHA backend: metadata per mode, graph paths, routing, the three fixes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import torch

import prtoggle
from fixes.attention.trtllm_mha_backend import (
    TRTLLMHAAttnBackend,
    TRTLLMHAAttnMultiStepDraftBackend,
)
from fixes.attention.trtllm_mha_metadata import ForwardMetadata
from fixes.errors import AttentionBackendError
from fixes.forward_batch import (
    DraftDecodeInput,
    DraftExtendInput,
    ForwardBatch,
    ForwardMode,
    VerifyInput,
)
from fixes.model.toy_requests import ToyRequest, ToyStack, build_stack, random_tokens
from prtoggle import detect
from prtoggle.detect import config
from prtoggle.errors import OOBDetected

PREFIX_LENS = [5, 9, 3]
PAGE_SIZE = 4
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def fresh_detect_state(monkeypatch: pytest.MonkeyPatch, fresh_detection_state: None) -> None:
    for name in (
        config.NAN_DETECTION_ENV,
        config.OOB_DETECTION_ENV,
        config.POISON_ENV,
        config.MODE_ENV,
        "SGLANG_DEBUG_REVERT_PR",
    ):
        monkeypatch.delenv(name, raising=False)


@dataclass
class Prefilled:
    stack: ToyStack
    backend: TRTLLMHAAttnBackend
    requests: list[ToyRequest]

    def backend_for_step(self, step: int) -> TRTLLMHAAttnBackend:
        return TRTLLMHAAttnBackend(
            req_to_token_pool=self.stack.req_to_token_pool,
            token_to_kv_pool=self.stack.token_to_kv_pool,
            speculative_step_id=step,
        )

    def tokens(self, lengths: list[int], seed: int) -> list[list[int]]:
        return random_tokens(lengths, vocab_size=self.stack.model.config.vocab_size, seed=seed)

    def reference_tail(self, counts: list[int]) -> torch.Tensor:
        return torch.cat(
            [
                self.stack.model.reference(torch.tensor(r.token_ids))[-n:]
                for r, n in zip(self.requests, counts, strict=True)
            ]
        )


@pytest.fixture
def prefilled() -> Iterator[Prefilled]:
    stack = build_stack(device=CPU, page_size=PAGE_SIZE)
    backend = TRTLLMHAAttnBackend(
        req_to_token_pool=stack.req_to_token_pool, token_to_kv_pool=stack.token_to_kv_pool
    )
    requests = stack.new_requests(len(PREFIX_LENS))
    state = Prefilled(stack=stack, backend=backend, requests=requests)
    batch = stack.extend_batch(requests, state.tokens(PREFIX_LENS, seed=1))
    backend.init_forward_metadata(batch)
    stack.model.forward(batch, backend)
    yield state


def expected_pages(stack: ToyStack, requests: list[ToyRequest], num_pages: int) -> torch.Tensor:
    req_to_token = stack.req_to_token_pool.req_to_token
    return torch.stack(
        [req_to_token[r.row, : num_pages * PAGE_SIZE : PAGE_SIZE] // PAGE_SIZE for r in requests]
    ).to(torch.int32)


def assert_metadata(
    metadata: ForwardMetadata | None,
    *,
    cache_seq_lens: list[int],
    cu_seq_lens_q: list[int],
    max_seq_len_q: int,
    max_seq_len_k: int,
) -> ForwardMetadata:
    assert metadata is not None
    assert metadata.cache_seq_lens.tolist() == cache_seq_lens
    assert metadata.cu_seq_lens_q.tolist() == cu_seq_lens_q
    cu_k = [0]
    for n in cache_seq_lens:
        cu_k.append(cu_k[-1] + n)
    assert metadata.cu_seq_lens_k.tolist() == cu_k
    assert (metadata.max_seq_len_q, metadata.max_seq_len_k) == (max_seq_len_q, max_seq_len_k)
    assert metadata.cache_seq_lens.dtype == torch.int32
    assert metadata.page_table.dtype == torch.int32
    return metadata


def draft_extend_batch(state: Prefilled, accept: list[int]) -> ForwardBatch:
    return state.stack.extend_batch(
        state.requests,
        state.tokens(accept, seed=7),
        mode=ForwardMode.DRAFT_EXTEND_V2,
        spec_info=DraftExtendInput(
            accept_lengths=torch.tensor(accept, dtype=torch.int32),
            accept_lengths_cpu=list(accept),
        ),
    )


def test_extend_metadata_is_prefill_shaped_with_the_requests_pages(prefilled: Prefilled) -> None:
    metadata = assert_metadata(
        prefilled.backend.forward_metadata,
        cache_seq_lens=[5, 9, 3],
        cu_seq_lens_q=[0, 5, 14, 17],
        max_seq_len_q=9,
        max_seq_len_k=9,
    )
    assert torch.equal(metadata.page_table, expected_pages(prefilled.stack, prefilled.requests, 3))


def test_decode_metadata_has_one_query_row_per_request(prefilled: Prefilled) -> None:
    batch = prefilled.stack.extend_batch(
        prefilled.requests, prefilled.tokens([1, 1, 1], seed=2), mode=ForwardMode.DECODE
    )
    prefilled.backend.init_forward_metadata(batch)
    assert_metadata(
        prefilled.backend.forward_metadata,
        cache_seq_lens=[6, 10, 4],
        cu_seq_lens_q=[0, 1, 2, 3],
        max_seq_len_q=1,
        max_seq_len_k=10,
    )
    out = prefilled.stack.model.forward(batch, prefilled.backend)
    torch.testing.assert_close(out, prefilled.reference_tail([1, 1, 1]), atol=1e-4, rtol=0)


def test_draft_decode_step_two_attends_to_prefix_plus_three_tokens(prefilled: Prefilled) -> None:
    batches = prefilled.stack.draft_decode_batches(
        prefilled.requests, prefilled.tokens([3, 3, 3], seed=3), num_steps=3
    )
    backend = prefilled.backend_for_step(2)
    backend.init_forward_metadata(batches[2])
    metadata = assert_metadata(
        backend.forward_metadata,
        cache_seq_lens=[8, 12, 6],
        cu_seq_lens_q=[0, 1, 2, 3],
        max_seq_len_q=1,
        max_seq_len_k=12,
    )
    assert metadata.page_table.shape == (3, 3)


def test_target_verify_metadata_has_uniform_query_rows(prefilled: Prefilled) -> None:
    batch = prefilled.stack.extend_batch(
        prefilled.requests,
        prefilled.tokens([2, 2, 2], seed=4),
        mode=ForwardMode.TARGET_VERIFY,
        spec_info=VerifyInput(draft_token_num=2),
    )
    prefilled.backend.init_forward_metadata(batch)
    assert_metadata(
        prefilled.backend.forward_metadata,
        cache_seq_lens=[7, 11, 5],
        cu_seq_lens_q=[0, 2, 4, 6],
        max_seq_len_q=2,
        max_seq_len_k=11,
    )
    out = prefilled.stack.model.forward(batch, prefilled.backend)
    torch.testing.assert_close(out, prefilled.reference_tail([2, 2, 2]), atol=1e-4, rtol=0)


def test_draft_extend_metadata_follows_the_accept_lengths(prefilled: Prefilled) -> None:
    batch = draft_extend_batch(prefilled, [1, 3, 2])
    prefilled.backend.init_forward_metadata(batch)
    assert_metadata(
        prefilled.backend.forward_metadata,
        cache_seq_lens=[6, 12, 5],
        cu_seq_lens_q=[0, 1, 4, 6],
        max_seq_len_q=3,
        max_seq_len_k=12,
    )
    out = prefilled.stack.model.forward(batch, prefilled.backend)
    torch.testing.assert_close(out, prefilled.reference_tail([1, 3, 2]), atol=1e-4, rtol=0)


def test_draft_extend_reverted_24856_reads_query_rows_past_the_end(prefilled: Prefilled) -> None:
    batch = draft_extend_batch(prefilled, [1, 3, 2])
    prefilled.backend.init_forward_metadata(batch)
    with (
        prtoggle.reverted(24856),
        pytest.raises(
            IndexError,
            match=re.escape("trtllm decode: index 6 is out of bounds for query with 6 rows"),
        ),
    ):
        prefilled.stack.model.forward(batch, prefilled.backend)


def test_draft_extend_reverted_24856_is_named_by_the_host_range_check(
    prefilled: Prefilled, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(config.OOB_DETECTION_ENV, "1")
    batch = draft_extend_batch(prefilled, [1, 3, 2])
    prefilled.backend.init_forward_metadata(batch)
    with prtoggle.reverted(24856), pytest.raises(OOBDetected) as caught:
        prefilled.stack.model.forward(batch, prefilled.backend)
    assert str(caught.value) == (
        "1 site hit: oob at trtllm_mha.forward_extend.decode_query_rows: 1 element, value 9 "
        "outside [0, 7), first hit in phase eager at step 0, lowest flat index 0"
    )


def test_padded_batch_size_reverted_21649_overruns_cu_seq_lens_q(prefilled: Prefilled) -> None:
    batch = prefilled.stack.extend_batch(prefilled.requests, prefilled.tokens([2, 1, 3], seed=5))
    prefilled.backend.init_forward_metadata(batch)
    batch.batch_size, batch.real_batch_size = 5, 3  # what DP padding does after metadata
    fixed_out = prefilled.stack.model.forward(batch, prefilled.backend)
    torch.testing.assert_close(fixed_out, prefilled.reference_tail([2, 1, 3]), atol=1e-4, rtol=0)
    with (
        prtoggle.reverted(21649),
        pytest.raises(
            IndexError,
            match=re.escape(
                "trtllm context: index 4 is out of bounds for cum_seq_lens_q with 4 rows"
            ),
        ),
    ):
        prefilled.stack.model.forward(batch, prefilled.backend)


def test_padded_batch_size_reverted_21649_is_named_with_oob_detection(
    prefilled: Prefilled, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(config.OOB_DETECTION_ENV, "1")
    batch = prefilled.stack.extend_batch(prefilled.requests, prefilled.tokens([2, 1, 3], seed=5))
    prefilled.backend.init_forward_metadata(batch)
    batch.batch_size = 5
    with prtoggle.reverted(21649), pytest.raises(OOBDetected) as caught:
        prefilled.stack.model.forward(batch, prefilled.backend)
    assert str(caught.value) == (
        "1 site hit: oob at trtllm_mha.forward_extend.batch_size: 1 element, value 5 outside "
        "[0, 4), first hit in phase eager at step 0, lowest flat index 0"
    )


def capture_then_replay(
    backend: TRTLLMHAAttnBackend, batch: ForwardBatch, *, fill: int = 1
) -> ForwardMetadata:
    """Capture metadata for the batch's size from fill values, then replay the live batch."""
    bs = int(batch.seq_lens.shape[0])
    backend.init_cuda_graph_state(max_bs=4)
    backend.init_forward_metadata_capture_cuda_graph(
        bs=bs,
        req_pool_indices=torch.zeros(bs, dtype=torch.int64),
        seq_lens=torch.full((bs,), fill, dtype=torch.int32),
        forward_mode=batch.forward_mode,
        spec_info=batch.spec_info,
    )
    captured = backend.forward_metadata
    backend.init_forward_metadata_replay_cuda_graph(
        bs=bs,
        req_pool_indices=batch.req_pool_indices,
        seq_lens=batch.seq_lens,
        seq_lens_cpu=batch.seq_lens_cpu,
        forward_mode=batch.forward_mode,
        spec_info=batch.spec_info,
    )
    assert backend.forward_metadata is captured  # replay refills the captured buffers
    return captured


@pytest.mark.parametrize("mode", ["decode", "draft_decode", "target_verify", "draft_extend"])
def test_graph_replay_metadata_and_output_equal_the_eager_path(
    prefilled: Prefilled, mode: str
) -> None:
    stack, requests = prefilled.stack, prefilled.requests
    if mode == "decode":
        batch = stack.extend_batch(
            requests, prefilled.tokens([1, 1, 1], 6), mode=ForwardMode.DECODE
        )
    elif mode == "draft_decode":
        batch = stack.draft_decode_batches(requests, prefilled.tokens([2, 2, 2], 6), num_steps=2)[1]
    elif mode == "target_verify":
        batch = stack.extend_batch(
            requests,
            prefilled.tokens([3, 3, 3], 6),
            mode=ForwardMode.TARGET_VERIFY,
            spec_info=VerifyInput(draft_token_num=3),
        )
    else:
        batch = draft_extend_batch(prefilled, [2, 1, 3])
    step = 1 if mode == "draft_decode" else 0
    eager_backend = prefilled.backend_for_step(step)
    graph_backend = prefilled.backend_for_step(step)
    eager_backend.init_forward_metadata(batch)
    eager = eager_backend.forward_metadata
    graph = capture_then_replay(graph_backend, batch)
    assert eager is not None
    for name in ("cache_seq_lens", "cu_seq_lens_q", "cu_seq_lens_k"):
        assert torch.equal(getattr(graph, name), getattr(eager, name)), name
    assert (graph.max_seq_len_q, graph.max_seq_len_k) == (eager.max_seq_len_q, eager.max_seq_len_k)
    width = eager.page_table.shape[1]
    assert torch.equal(graph.page_table[:, :width], eager.page_table)
    eager_out = stack.model.forward(batch, eager_backend)
    graph_out = stack.model.forward(batch, graph_backend)
    assert torch.equal(graph_out, eager_out)


def test_draft_decode_capture_writes_the_step_lengths(prefilled: Prefilled) -> None:
    backend = prefilled.backend_for_step(2)
    backend.init_cuda_graph_state(max_bs=4)
    backend.init_forward_metadata_capture_cuda_graph(
        bs=2,
        req_pool_indices=torch.zeros(2, dtype=torch.int64),
        seq_lens=torch.ones(2, dtype=torch.int32),
        forward_mode=ForwardMode.DECODE,
        spec_info=DraftDecodeInput(topk=1, num_steps=3),
    )
    assert_metadata(
        backend.forward_metadata,
        cache_seq_lens=[4, 4],
        cu_seq_lens_q=[0, 1, 2],
        max_seq_len_q=1,
        max_seq_len_k=4,
    )


def test_draft_decode_capture_reverted_26521_leaves_zero_lengths_and_nan(
    prefilled: Prefilled, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(config.NAN_DETECTION_ENV, "1")
    batch = prefilled.stack.draft_decode_batches(
        prefilled.requests, prefilled.tokens([1, 1, 1], seed=8), num_steps=1
    )[0]
    backend = prefilled.backend_for_step(0)
    backend.init_cuda_graph_state(max_bs=4)
    with prtoggle.reverted(26521):
        backend.init_forward_metadata_capture_cuda_graph(
            bs=3,
            req_pool_indices=batch.req_pool_indices,
            seq_lens=batch.seq_lens,
            forward_mode=ForwardMode.DECODE,
            spec_info=batch.spec_info,
        )
    metadata = backend.forward_metadata
    assert metadata is not None
    assert metadata.cache_seq_lens.tolist() == [0, 0, 0]
    assert metadata.max_seq_len_k == 10  # host value still right: only the copy is missing
    with detect.phase("capture-warmup"):
        out = prefilled.stack.model.forward(batch, backend)
    assert bool(out.isnan().all())
    with pytest.raises(
        prtoggle.errors.NaNDetected,
        match=re.escape(
            "2 sites hit, in first-hit order: nan at trtllm_mha.draft_decode[step=0].layer[0]"
            ".output: 192 elements in rows 0..2, first hit in phase capture-warmup"
        ),
    ):
        detect.check()


def test_forward_before_any_metadata_says_what_to_call(prefilled: Prefilled) -> None:
    backend = prefilled.backend_for_step(0)
    batch = prefilled.stack.extend_batch(
        prefilled.requests, prefilled.tokens([1, 1, 1], 9), mode=ForwardMode.DECODE
    )
    with pytest.raises(
        AttentionBackendError,
        match=re.escape(
            "forward before init_forward_metadata (eager) or "
            "init_forward_metadata_capture/replay_cuda_graph (graph); call one first"
        ),
    ):
        prefilled.stack.model.forward(batch, backend)


def test_capture_before_graph_state_and_replay_of_uncaptured_size_are_errors(
    prefilled: Prefilled,
) -> None:
    backend = prefilled.backend_for_step(0)
    ones = torch.ones(2, dtype=torch.int32)
    rows = torch.zeros(2, dtype=torch.int64)
    with pytest.raises(
        AttentionBackendError,
        match=re.escape(
            "CUDA graph capture of kind 'decode' before init_cuda_graph_state(max_bs=...)"
        ),
    ):
        backend.init_forward_metadata_capture_cuda_graph(
            bs=2,
            req_pool_indices=rows,
            seq_lens=ones,
            forward_mode=ForwardMode.DECODE,
            spec_info=None,
        )
    backend.init_cuda_graph_state(max_bs=4)
    backend.init_forward_metadata_capture_cuda_graph(
        bs=2, req_pool_indices=rows, seq_lens=ones, forward_mode=ForwardMode.DECODE, spec_info=None
    )
    with pytest.raises(
        AttentionBackendError,
        match=re.escape(
            "replay of a decode graph for bs=3: no such capture; captured batch sizes for "
            "decode: [2]"
        ),
    ):
        backend.init_forward_metadata_replay_cuda_graph(
            bs=3,
            req_pool_indices=rows,
            seq_lens=ones,
            seq_lens_cpu=ones,
            forward_mode=ForwardMode.DECODE,
            spec_info=None,
        )


def test_extend_graph_and_wrong_spec_input_are_refused(prefilled: Prefilled) -> None:
    backend = prefilled.backend_for_step(0)
    backend.init_cuda_graph_state(max_bs=2)
    ones = torch.ones(2, dtype=torch.int32)
    with pytest.raises(AttentionBackendError, match="forward mode EXTEND has no CUDA graph"):
        backend.init_forward_metadata_capture_cuda_graph(
            bs=2,
            req_pool_indices=ones.long(),
            seq_lens=ones,
            forward_mode=ForwardMode.EXTEND,
            spec_info=None,
        )
    with pytest.raises(
        AttentionBackendError,
        match=re.escape("TARGET_VERIFY needs spec_info of type VerifyInput, got NoneType"),
    ):
        backend.init_forward_metadata_capture_cuda_graph(
            bs=2,
            req_pool_indices=ones.long(),
            seq_lens=ones,
            forward_mode=ForwardMode.TARGET_VERIFY,
            spec_info=None,
        )


def test_multi_step_backend_gives_each_step_its_id_and_refuses_topk_above_one(
    prefilled: Prefilled,
) -> None:
    pools = {
        "req_to_token_pool": prefilled.stack.req_to_token_pool,
        "token_to_kv_pool": prefilled.stack.token_to_kv_pool,
    }
    multi = TRTLLMHAAttnMultiStepDraftBackend(num_steps=3, **pools)
    assert [b.speculative_step_id for b in multi.backends] == [0, 1, 2]
    with pytest.raises(
        AttentionBackendError,
        match=re.escape("TRT-LLM MHA multi-step draft: got topk=2, num_steps=3; expected topk=1"),
    ):
        TRTLLMHAAttnMultiStepDraftBackend(num_steps=3, topk=2, **pools)


def test_idle_batch_builds_empty_metadata_and_returns_no_rows(prefilled: Prefilled) -> None:
    batch = prefilled.stack.extend_batch([], [], mode=ForwardMode.IDLE)
    prefilled.backend.init_forward_metadata(batch)
    metadata = assert_metadata(
        prefilled.backend.forward_metadata,
        cache_seq_lens=[],
        cu_seq_lens_q=[0],
        max_seq_len_q=1,
        max_seq_len_k=0,
    )
    assert metadata.batch_size == 0
    out = prefilled.stack.model.forward(batch, prefilled.backend)
    assert out.shape == (0, prefilled.stack.model.config.hidden_size)

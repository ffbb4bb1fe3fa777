"""flashinfer provider of the TRT-LLM FMHA contract: page layout conversion (CPU), kernels (GPU)."""

from __future__ import annotations

import re
import sys

import pytest
import torch
from trtllm_fmha_cases import PagedBatch, assert_matches, make_batch

from fixes.errors import KernelContractError
from fixes.kernels import flashinfer_mha
from fixes.kernels.flashinfer_mha import paged_layout
from fixes.kernels.trtllm_fmha import (
    trtllm_batch_context_with_kv_cache,
    trtllm_batch_decode_with_kv_cache,
)


def test_paged_layout_lists_only_the_pages_each_request_uses() -> None:
    table = torch.tensor([[7, 3, 9], [2, 8, 8], [5, 6, 1]], dtype=torch.int32)
    layout = paged_layout(block_tables=table, kv_lens=torch.tensor([5, 4, 9]), page_size=4)
    assert layout.kv_indptr.tolist() == [0, 2, 3, 6]
    assert layout.kv_indices.tolist() == [7, 3, 2, 5, 6, 1]
    assert layout.kv_last_page_len.tolist() == [1, 4, 1]
    assert {t.dtype for t in (layout.kv_indptr, layout.kv_indices, layout.kv_last_page_len)} == {
        torch.int32
    }


def test_paged_layout_treats_zero_and_negative_lengths_as_empty() -> None:
    table = torch.tensor([[4, 4], [1, 2], [3, 3]], dtype=torch.int32)
    layout = paged_layout(block_tables=table, kv_lens=torch.tensor([0, 2, -1]), page_size=1)
    assert layout.kv_indptr.tolist() == [0, 0, 2, 2]
    assert layout.kv_indices.tolist() == [1, 2]
    assert layout.kv_last_page_len.tolist() == [0, 1, 0]


def test_paged_layout_past_the_page_table_raises_index_error() -> None:
    table = torch.zeros((2, 2), dtype=torch.int32)
    with pytest.raises(
        IndexError,
        match=re.escape(
            "flashinfer provider: a request needs 3 pages but block_tables has 2 columns"
        ),
    ):
        paged_layout(block_tables=table, kv_lens=torch.tensor([2, 9]), page_size=4)
    with pytest.raises(
        IndexError, match=re.escape("flashinfer provider: 3 requests but block_tables has 2 rows")
    ):
        paged_layout(block_tables=table, kv_lens=torch.tensor([1, 1, 1]), page_size=4)


def test_missing_flashinfer_is_reported_with_the_provider_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "flashinfer", None)  # import now raises ImportError
    with pytest.raises(
        KernelContractError,
        match=(
            r"^provider 'flashinfer' needs the flashinfer package \(pip install "
            r"'prtoggle\[gpu\]'\): .*; choices: torch, triton, flashinfer$"
        ),
    ):
        flashinfer_mha._import_flashinfer()


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
GPU_SHAPES = [  # (bs, q_len_per_req, page_size, num_heads, num_kv_heads)
    (4, 1, 16, 32, 8),  # group 4: tensor-core decode
    (5, 1, 1, 4, 2),  # group 2: CUDA-core decode
    (3, 3, 16, 8, 2),  # q_len_per_req > 1: causal paged prefill
]


def gpu_decode_batch(shape: tuple[int, ...]) -> PagedBatch:
    bs, q_len, page_size, heads, kv_heads = shape
    return make_batch(
        q_lens=[q_len] * bs,
        kv_lens=[q_len + 40 * b + 7 for b in range(bs)],
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=128,
        page_size=page_size,
        dtype=torch.bfloat16,
        seed=bs,
        device="cuda",
    )


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=str)
def test_flashinfer_triton_and_torch_decode_agree_on_cuda(shape: tuple[int, ...]) -> None:
    batch = gpu_decode_batch(shape)
    results = {
        provider: trtllm_batch_decode_with_kv_cache(
            query=batch.query,
            k_cache=batch.k_cache,
            v_cache=batch.v_cache,
            block_tables=batch.block_tables,
            seq_lens=batch.seq_lens,
            max_seq_len=int(batch.seq_lens.max()),
            softmax_scale=batch.softmax_scale,
            q_len_per_req=shape[1],
            provider=provider,
        )
        for provider in ("torch", "triton", "flashinfer")
    }
    expected = results["torch"].double().cpu()
    assert not torch.isnan(expected).any()
    assert_matches(results["flashinfer"], expected, rel=2e-2)
    assert_matches(results["triton"], expected, rel=2e-2)


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("page_size", [1, 16])
def test_flashinfer_triton_and_torch_context_agree_on_cuda(page_size: int) -> None:
    batch = make_batch(
        q_lens=[5, 1, 300, 64],
        kv_lens=[5, 9, 700, 64],
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        page_size=page_size,
        dtype=torch.bfloat16,
        seed=3,
        device="cuda",
    )
    results = {
        provider: trtllm_batch_context_with_kv_cache(
            query=batch.query,
            k_cache=batch.k_cache,
            v_cache=batch.v_cache,
            block_tables=batch.block_tables,
            seq_lens=batch.seq_lens,
            max_q_len=300,
            max_kv_len=700,
            softmax_scale=batch.softmax_scale,
            batch_size=4,
            cum_seq_lens_q=batch.cum_seq_lens_q,
            cum_seq_lens_kv=batch.cum_seq_lens_q,
            provider=provider,
        )
        for provider in ("torch", "triton", "flashinfer")
    }
    expected = results["torch"].double().cpu()
    assert not torch.isnan(expected).any()
    assert_matches(results["flashinfer"], expected, rel=2e-2)
    assert_matches(results["triton"], expected, rel=2e-2)


@pytest.mark.gpu
@CUDA
def test_flashinfer_decode_reading_past_the_query_raises_index_error() -> None:
    batch = make_batch(
        q_lens=[1, 3, 2, 4],
        kv_lens=[5, 7, 6, 8],
        num_heads=8,
        num_kv_heads=2,
        head_dim=128,
        page_size=16,
        dtype=torch.bfloat16,
        seed=0,
        device="cuda",
    )
    with pytest.raises(
        IndexError, match=re.escape("flashinfer provider: 16 rows needed but query has 10")
    ):
        trtllm_batch_decode_with_kv_cache(
            query=batch.query,
            k_cache=batch.k_cache,
            v_cache=batch.v_cache,
            block_tables=batch.block_tables,
            seq_lens=batch.seq_lens,
            max_seq_len=8,
            softmax_scale=batch.softmax_scale,
            q_len_per_req=4,
            provider="flashinfer",
        )

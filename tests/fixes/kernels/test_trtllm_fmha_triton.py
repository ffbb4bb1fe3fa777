"""Triton decode and context kernels of the TRT-LLM FMHA contract, interpreted on CPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from trtllm_fmha_cases import PagedBatch, assert_matches, make_batch, naive_attention, rel_tolerance

from fixes.errors import KernelContractError
from fixes.kernels.trtllm_fmha_contract import ContextArgs, DecodeArgs
from fixes.kernels.trtllm_fmha_triton import TritonBlockConfig, triton_context, triton_decode

interpreted = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1",
    reason="Triton on CPU tensors needs TRITON_INTERPRET=1 (tests/conftest.py sets it)",
)

# The interpreter evaluates 0/0 and exp2(-inf - -inf) with numpy, which warns; those NaNs
# are the contract (empty KV ranges), asserted below.
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:All-NaN slice encountered:RuntimeWarning"),
]

DECODE_CASES = [  # (bs, q_len_per_req, page_size, num_heads, num_kv_heads, head_dim)
    (1, 1, 1, 4, 2, 16),
    (4, 1, 4, 2, 2, 32),
    (2, 3, 4, 4, 2, 16),
    (3, 3, 1, 2, 2, 16),
]
DTYPES = [torch.float32, torch.bfloat16]
CPU_TILES = TritonBlockConfig(decode_block_n=16, context_block_m=16, context_block_n=16)
PACKED = TritonBlockConfig(decode_block_n=16, context_pack_max_q_len=64)
TILED = TritonBlockConfig(context_block_m=16, context_block_n=16, context_pack_max_q_len=0)


def run_decode(batch: PagedBatch, *, q_len_per_req: int, splits: int = 1) -> torch.Tensor:
    config = TritonBlockConfig(decode_block_n=16, num_kv_splits=splits)
    rows = batch.seq_lens.shape[0] * q_len_per_req
    out = torch.empty(
        (rows, *batch.query.shape[1:]), dtype=batch.query.dtype, device=batch.query.device
    )
    return triton_decode(
        DecodeArgs(
            query=batch.query,
            k_cache=batch.k_cache,
            v_cache=batch.v_cache,
            block_tables=batch.block_tables,
            seq_lens=batch.seq_lens,
            max_seq_len=int(batch.seq_lens.max()),
            softmax_scale=batch.softmax_scale,
            q_len_per_req=q_len_per_req,
            out=out,
        ),
        config=config,
    )


def run_context(batch: PagedBatch, *, config: TritonBlockConfig = CPU_TILES) -> torch.Tensor:
    return triton_context(
        ContextArgs(
            query=batch.query,
            k_cache=batch.k_cache,
            v_cache=batch.v_cache,
            block_tables=batch.block_tables,
            seq_lens=batch.seq_lens,
            max_q_len=max(batch.q_lens),
            max_kv_len=int(batch.seq_lens.max()),
            softmax_scale=batch.softmax_scale,
            batch_size=len(batch.q_lens),
            cum_seq_lens_q=batch.cum_seq_lens_q,
            out=torch.zeros_like(batch.query),
        ),
        config=config,
    )


def decode_case(case: tuple[int, ...], dtype: torch.dtype, *, device: str = "cpu") -> PagedBatch:
    bs, q_len, page_size, heads, kv_heads, head_dim = case
    kv_lens = [q_len + 1 + 13 * b for b in range(bs)]  # crosses 16-token tiles for b >= 1
    return make_batch(
        q_lens=[q_len] * bs,
        kv_lens=kv_lens,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        page_size=page_size,
        dtype=dtype,
        seed=11 * bs + q_len,
        device=device,
    )


def context_case(page_size: int, dtype: torch.dtype, *, device: str = "cpu") -> PagedBatch:
    # request 2 spans two 16-row query tiles and has full (unmasked) key tiles
    return make_batch(
        q_lens=[5, 1, 19, 3],
        kv_lens=[5, 9, 50, 3],
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        page_size=page_size,
        dtype=dtype,
        seed=5,
        device=device,
    )


@interpreted
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", DECODE_CASES, ids=str)
def test_triton_decode_matches_dense_attention(case: tuple[int, ...], dtype: torch.dtype) -> None:
    batch = decode_case(case, dtype)
    result = run_decode(batch, q_len_per_req=case[1])
    assert not torch.isnan(result).any()
    assert_matches(result, naive_attention(batch), rel=rel_tolerance(dtype))


@interpreted
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_triton_split_kv_decode_matches_dense_attention(dtype: torch.dtype) -> None:
    batch = decode_case((3, 3, 4, 4, 2, 16), dtype)  # kv lens 4, 17, 30; splits of 16
    result = run_decode(batch, q_len_per_req=3, splits=3)  # request 0: two empty splits
    assert not torch.isnan(result).any()
    assert_matches(result, naive_attention(batch), rel=rel_tolerance(dtype))


@interpreted
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("page_size", [1, 4])
def test_triton_context_matches_dense_attention(page_size: int, dtype: torch.dtype) -> None:
    batch = context_case(page_size, dtype)
    result = run_context(batch)
    assert not torch.isnan(result).any()
    assert_matches(result, naive_attention(batch), rel=rel_tolerance(dtype))


@interpreted
@pytest.mark.parametrize("splits", [1, 2])
def test_triton_decode_spreads_a_long_query_window_over_programs(splits: int) -> None:
    # 16 heads per KV head: 4 query rows fill a 64-row tile, so 5 rows need 2 programs
    batch = make_batch(
        q_lens=[5, 5],
        kv_lens=[6, 23],
        num_heads=16,
        num_kv_heads=1,
        head_dim=16,
        page_size=4,
        dtype=torch.float32,
        seed=15,
    )
    result = run_decode(batch, q_len_per_req=5, splits=splits)
    assert not torch.isnan(result).any()
    assert_matches(result, naive_attention(batch), rel=1e-5)


@interpreted
def test_triton_kernels_accept_float16() -> None:
    batch = make_batch(
        q_lens=[2, 2],
        kv_lens=[7, 20],
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        page_size=4,
        dtype=torch.float16,
        seed=14,
    )
    expected = naive_attention(batch)
    assert_matches(run_decode(batch, q_len_per_req=2, splits=2), expected, rel=2e-2)
    assert_matches(run_context(batch), expected, rel=2e-2)


@interpreted
@pytest.mark.parametrize("splits", [1, 2])
def test_triton_decode_over_an_empty_kv_range_gives_nan(splits: int) -> None:
    batch = make_batch(
        q_lens=[3, 3],
        kv_lens=[2, 20],
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        page_size=4,
        dtype=torch.float32,
        seed=2,
    )
    result = run_decode(batch, q_len_per_req=3, splits=splits)
    assert torch.isnan(result[0]).all()  # request 0, draft row 0 sees keys [0, -1]
    assert not torch.isnan(result[1:]).any()
    assert_matches(result, naive_attention(batch), rel=1e-5)


@interpreted
def test_triton_decode_with_zero_seq_len_gives_nan_for_that_request_only() -> None:
    batch = make_batch(
        q_lens=[1, 1],
        kv_lens=[0, 9],
        num_heads=2,
        num_kv_heads=2,
        head_dim=16,
        page_size=1,
        dtype=torch.float32,
        seed=4,
    )
    result = run_decode(batch, q_len_per_req=1)
    assert torch.isnan(result[0]).all()
    assert not torch.isnan(result[1]).any()


@interpreted
def test_triton_context_rows_before_the_kv_start_give_nan() -> None:
    batch = make_batch(
        q_lens=[3, 20],
        kv_lens=[1, 18],
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        page_size=4,
        dtype=torch.float32,
        seed=6,
    )
    result = run_context(batch)  # request 0 rows 0-1, request 1 rows 0-1 see no key
    expected = naive_attention(batch)
    assert torch.isnan(result[[0, 1, 3, 4]]).all()
    assert_matches(result, expected, rel=1e-5)


@interpreted
def test_triton_context_with_several_query_tiles_per_request() -> None:
    batch = make_batch(
        q_lens=[40],
        kv_lens=[70],
        num_heads=2,
        num_kv_heads=2,
        head_dim=16,
        page_size=4,
        dtype=torch.float32,
        seed=8,
    )
    config = TritonBlockConfig(context_block_m=16, context_block_n=32)
    assert_matches(run_context(batch, config=config), naive_attention(batch), rel=1e-5)


@interpreted
@pytest.mark.parametrize("heads_fastest", [True, False], ids=["heads-fastest", "blocks-fastest"])
def test_both_context_grid_orders_match_dense_attention_with_nan_and_skipped_rows(
    heads_fastest: bool,
) -> None:
    # GQA group 2; request 0: 3 query tiles, rows 0-1 see no key; request 1: rows 40-43
    # are past max_q_len (left as zeros); request 2: no query row
    batch = make_batch(
        q_lens=[36, 44, 0],
        kv_lens=[34, 50, 7],
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        page_size=4,
        dtype=torch.float32,
        seed=17,
    )
    config = TritonBlockConfig(
        context_block_m=16, context_block_n=16, context_heads_fastest=heads_fastest
    )
    result = triton_context(
        ContextArgs(
            query=batch.query,
            k_cache=batch.k_cache,
            v_cache=batch.v_cache,
            block_tables=batch.block_tables,
            seq_lens=batch.seq_lens,
            max_q_len=40,
            max_kv_len=50,
            softmax_scale=batch.softmax_scale,
            batch_size=3,
            cum_seq_lens_q=batch.cum_seq_lens_q,
            out=torch.zeros_like(batch.query),
        ),
        config=config,
    )
    expected = naive_attention(batch)
    assert torch.isnan(result[0:2]).all()
    assert not torch.isnan(result[2:]).any()
    assert_matches(result[:76], expected[:76], rel=1e-5)
    assert torch.equal(result[76:], torch.zeros_like(result[76:]))


@interpreted
def test_public_api_runs_the_triton_provider_on_cpu() -> None:
    from fixes.kernels.trtllm_fmha import (
        trtllm_batch_context_with_kv_cache,
        trtllm_batch_decode_with_kv_cache,
    )

    batch = make_batch(
        q_lens=[2, 2],
        kv_lens=[3, 21],
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        page_size=4,
        dtype=torch.float32,
        seed=12,
    )
    common: dict[str, Any] = dict(
        query=batch.query,
        k_cache=batch.k_cache,
        v_cache=batch.v_cache,
        block_tables=batch.block_tables,
        seq_lens=batch.seq_lens,
        softmax_scale=batch.softmax_scale,
        provider="triton",
    )
    decoded = trtllm_batch_decode_with_kv_cache(**common, max_seq_len=21, q_len_per_req=2)
    extended = trtllm_batch_context_with_kv_cache(
        **common,
        max_q_len=2,
        max_kv_len=21,
        batch_size=2,
        cum_seq_lens_q=batch.cum_seq_lens_q,
        cum_seq_lens_kv=batch.cum_seq_lens_q,
    )
    expected = naive_attention(batch)
    assert_matches(decoded, expected, rel=1e-5)
    assert_matches(extended, expected, rel=1e-5)


@interpreted
def test_triton_context_leaves_rows_past_max_q_len_uncomputed_like_the_reference() -> None:
    from fixes.kernels.trtllm_fmha_reference import context_reference

    batch = make_batch(
        q_lens=[6, 2],
        kv_lens=[9, 4],
        num_heads=2,
        num_kv_heads=2,
        head_dim=16,
        page_size=4,
        dtype=torch.float32,
        seed=13,
    )
    common: dict[str, Any] = dict(
        query=batch.query,
        k_cache=batch.k_cache,
        v_cache=batch.v_cache,
        block_tables=batch.block_tables,
        seq_lens=batch.seq_lens,
        max_q_len=4,
        max_kv_len=9,
        softmax_scale=batch.softmax_scale,
        batch_size=2,
        cum_seq_lens_q=batch.cum_seq_lens_q,
    )
    result = triton_context(
        ContextArgs(**common, out=torch.zeros_like(batch.query)), config=CPU_TILES
    )
    expected = context_reference(ContextArgs(**common, out=torch.zeros_like(batch.query)))
    assert torch.equal(result[4:6], torch.zeros_like(result[4:6]))  # request 0 rows 4, 5
    assert_matches(result, expected.double(), rel=1e-5)


DRAFT_LIKE: dict[str, Any] = dict(
    q_lens=[4, 1, 0, 3],
    kv_lens=[37, 9, 20, 3],
    num_heads=8,
    num_kv_heads=2,
    head_dim=16,
    page_size=4,
    seed=21,
)


@interpreted
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("splits", [1, 3])
def test_packed_context_with_uneven_query_windows_matches_dense_attention(
    splits: int, dtype: torch.dtype
) -> None:
    batch = make_batch(**DRAFT_LIKE, dtype=dtype)  # request 2 has no query row
    config = TritonBlockConfig(decode_block_n=16, num_kv_splits=splits)  # 4 rows: packed
    result = run_context(batch, config=config)
    assert not torch.isnan(result).any()
    assert_matches(result, naive_attention(batch), rel=rel_tolerance(dtype))


@interpreted
@pytest.mark.parametrize("config", [PACKED, TILED], ids=["packed", "tiled"])
def test_context_paths_agree_on_a_draft_like_batch(config: TritonBlockConfig) -> None:
    batch = make_batch(**DRAFT_LIKE, dtype=torch.float32)
    assert_matches(run_context(batch, config=config), naive_attention(batch), rel=1e-5)


@interpreted
@pytest.mark.parametrize("splits", [1, 2])
def test_packed_context_rows_before_the_kv_start_give_nan(splits: int) -> None:
    batch = make_batch(
        q_lens=[3, 5],
        kv_lens=[1, 18],
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        page_size=4,
        dtype=torch.float32,
        seed=6,
    )
    config = TritonBlockConfig(decode_block_n=16, num_kv_splits=splits)
    result = run_context(batch, config=config)  # request 0 rows 0-1 see no key
    assert torch.isnan(result[[0, 1]]).all()
    assert not torch.isnan(result[2:]).any()
    assert_matches(result, naive_attention(batch), rel=1e-5)


@interpreted
@pytest.mark.parametrize("splits", [1, 2])
def test_packed_context_leaves_rows_past_max_q_len_untouched(splits: int) -> None:
    from fixes.kernels.trtllm_fmha_reference import context_reference

    batch = make_batch(
        q_lens=[6, 2],
        kv_lens=[40, 4],
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        page_size=4,
        dtype=torch.float32,
        seed=13,
    )
    common: dict[str, Any] = dict(
        query=batch.query,
        k_cache=batch.k_cache,
        v_cache=batch.v_cache,
        block_tables=batch.block_tables,
        seq_lens=batch.seq_lens,
        max_q_len=4,
        max_kv_len=40,
        softmax_scale=batch.softmax_scale,
        batch_size=2,
        cum_seq_lens_q=batch.cum_seq_lens_q,
    )
    config = TritonBlockConfig(decode_block_n=16, num_kv_splits=splits)
    result = triton_context(
        ContextArgs(**common, out=torch.full_like(batch.query, 7.0)), config=config
    )
    expected = context_reference(ContextArgs(**common, out=torch.full_like(batch.query, 7.0)))
    assert torch.equal(result[4:6], torch.full_like(result[4:6], 7.0))  # request 0 rows 4, 5
    assert_matches(result, expected.double(), rel=1e-5)


def test_triton_rejects_a_head_dim_it_cannot_tile() -> None:
    batch = make_batch(
        q_lens=[1],
        kv_lens=[3],
        num_heads=2,
        num_kv_heads=2,
        head_dim=24,
        page_size=1,
        dtype=torch.float32,
        seed=0,
    )
    with pytest.raises(
        KernelContractError,
        match=(
            r"^the triton provider needs head_dim a power of two >= 16, got 24; choices for "
            r"other sizes: torch, flashinfer$"
        ),
    ):
        run_decode(batch, q_len_per_req=1)


def test_triton_rejects_a_query_strided_along_head_dim() -> None:
    batch = make_batch(
        q_lens=[1],
        kv_lens=[3],
        num_heads=2,
        num_kv_heads=2,
        head_dim=16,
        page_size=1,
        dtype=torch.float32,
        seed=0,
    )
    strided = PagedBatch(**{**batch.__dict__, "query": batch.query.mT.contiguous().mT})
    with pytest.raises(
        KernelContractError,
        match=re.escape(
            "the triton provider needs unit stride along the last dimension, got {'query': 2, "
            "'k_cache': 1, 'v_cache': 1, 'out': 1, 'block_tables': 1}; choices: make them "
            "contiguous, or provider torch"
        ),
    ):
        run_decode(strided, q_len_per_req=1)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "case",
    [(4, 1, 16, 8, 2, 128), (3, 3, 1, 4, 4, 64), (64, 1, 16, 32, 8, 128), (2, 6, 16, 32, 2, 128)],
    ids=str,
)
def test_triton_decode_on_cuda_matches_the_reference(
    case: tuple[int, ...], dtype: torch.dtype
) -> None:
    from fixes.kernels.trtllm_fmha import trtllm_batch_decode_with_kv_cache

    batch = decode_case(case, dtype, device="cuda")
    common: dict[str, Any] = dict(
        query=batch.query,
        k_cache=batch.k_cache,
        v_cache=batch.v_cache,
        block_tables=batch.block_tables,
        seq_lens=batch.seq_lens,
        max_seq_len=int(batch.seq_lens.max()),
        softmax_scale=batch.softmax_scale,
        q_len_per_req=case[1],
    )
    triton_out = trtllm_batch_decode_with_kv_cache(**common, provider="triton")
    torch_out = trtllm_batch_decode_with_kv_cache(**common, provider="torch")
    assert not torch.isnan(triton_out).any()
    rel = 1e-4 if dtype == torch.float32 else 2e-2
    assert_matches(triton_out, torch_out.double().cpu(), rel=rel)


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("splits", [1, 4])
def test_triton_decode_on_cuda_gives_nan_for_an_empty_range(splits: int) -> None:
    batch = make_batch(
        q_lens=[1, 1],
        kv_lens=[0, 300],
        num_heads=8,
        num_kv_heads=2,
        head_dim=128,
        page_size=16,
        dtype=torch.bfloat16,
        seed=1,
        device="cuda",
    )
    out = torch.empty_like(batch.query)
    triton_decode(
        DecodeArgs(
            query=batch.query,
            k_cache=batch.k_cache,
            v_cache=batch.v_cache,
            block_tables=batch.block_tables,
            seq_lens=batch.seq_lens,
            max_seq_len=300,
            softmax_scale=batch.softmax_scale,
            q_len_per_req=1,
            out=out,
        ),
        config=TritonBlockConfig(num_kv_splits=splits),
    )
    assert torch.isnan(out[0]).all()
    assert not torch.isnan(out[1]).any()


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("heads_fastest", [None, False], ids=["default-order", "blocks-fastest"])
def test_triton_context_on_cuda_matches_the_reference(
    heads_fastest: bool | None, page_size: int, dtype: torch.dtype
) -> None:
    batch = make_batch(
        q_lens=[5, 1, 300, 130],
        kv_lens=[5, 9, 700, 130],
        num_heads=8,
        num_kv_heads=2,
        head_dim=128,
        page_size=page_size,
        dtype=dtype,
        seed=9,
        device="cuda",
    )
    from fixes.kernels.trtllm_fmha_reference import context_reference

    result = run_context(batch, config=TritonBlockConfig(context_heads_fastest=heads_fastest))
    expected = context_reference(
        ContextArgs(
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
            out=torch.zeros_like(batch.query),
        )
    )
    assert not torch.isnan(result).any()
    assert_matches(result, expected.double().cpu(), rel=1e-4 if dtype == torch.float32 else 2e-2)


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("splits", [None, 1, 4])
def test_packed_context_on_cuda_matches_the_reference(
    splits: int | None, dtype: torch.dtype
) -> None:
    from fixes.kernels.trtllm_fmha_reference import context_reference

    batch = make_batch(
        q_lens=[4, 4, 2, 0, 4],
        kv_lens=[4, 900, 300, 50, 4100],
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        page_size=64,
        dtype=dtype,
        seed=23,
        device="cuda",
    )
    common: dict[str, Any] = dict(
        query=batch.query,
        k_cache=batch.k_cache,
        v_cache=batch.v_cache,
        block_tables=batch.block_tables,
        seq_lens=batch.seq_lens,
        max_q_len=4,
        max_kv_len=4100,
        softmax_scale=batch.softmax_scale,
        batch_size=5,
        cum_seq_lens_q=batch.cum_seq_lens_q,
    )
    result = triton_context(
        ContextArgs(**common, out=torch.zeros_like(batch.query)),
        config=TritonBlockConfig(num_kv_splits=splits),
    )
    expected = context_reference(ContextArgs(**common, out=torch.zeros_like(batch.query)))
    assert not torch.isnan(result).any()
    assert_matches(result, expected.double().cpu(), rel=1e-4 if dtype == torch.float32 else 2e-2)


_SM90_CONTEXT_COMPILE = r"""
import os, re, subprocess, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from fixes.kernels import trtllm_fmha_triton_kernels as kernels

names = ["Q", "K", "V", "BlockTables", "SeqLens", "CumSeqLensQ", "Out", "scale_log2",
         "max_q_len", "stride_qr", "stride_qh", "stride_kp", "stride_ks", "stride_kh",
         "stride_vp", "stride_vs", "stride_vh", "stride_bt", "stride_or", "stride_oh"]
types = ["*bf16"] * 3 + ["*i32"] * 3 + ["*bf16", "fp32"] + ["i32"] * 12
const = dict(GROUP=4, HEAD_DIM=128, PAGE_SIZE=16, BLOCK_M=64, BLOCK_N=64, HEADS_FASTEST=True,
             PRECISION="tf32", UPCAST_DOT=False)  # the <= 2048-row default for bf16 D 128
signature = dict(zip(names, types), **{name: "constexpr" for name in const})
attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(names)) if names[i] != "scale_log2"}
source = ASTSource(fn=kernels.context_kernel, signature=signature, constexprs=const,
                   attrs=attrs)
compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 4, "num_stages": 2})
with tempfile.NamedTemporaryFile("wb", suffix=".cubin", delete=False) as cubin:
    cubin.write(compiled.asm["cubin"])
tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
usage = subprocess.run([tool, "--dump-resource-usage", cubin.name], capture_output=True,
                       text=True, check=True).stdout
print(re.search(r"STACK:\d+", usage).group(0), compiled.metadata.shared <= 114 * 1024)
"""


@pytest.mark.slow
def test_short_window_context_tile_compiles_for_sm90_without_spills_two_per_sm(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", _SM90_CONTEXT_COMPILE],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "STACK:0 True\n"  # no spills; two programs fit 228 KiB smem

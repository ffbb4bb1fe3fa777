"""Dispatch, contract edge behaviour and the torch reference of fixes.kernels.trtllm_fmha."""

from __future__ import annotations

import re

import pytest
import torch
from trtllm_fmha_cases import PagedBatch, assert_matches, make_batch, naive_attention, rel_tolerance

from fixes.errors import KernelContractError
from fixes.kernels.trtllm_fmha import (
    default_provider,
    trtllm_batch_context_with_kv_cache,
    trtllm_batch_decode_with_kv_cache,
)
from prtoggle import detect
from prtoggle.detect.redzones import buffers
from prtoggle.errors import RedzoneRead, RedzoneViolation

SHAPES = [  # (bs, q_len_per_req, page_size, num_heads, num_kv_heads)
    (1, 1, 1, 4, 2),
    (4, 1, 4, 2, 2),
    (2, 3, 1, 2, 2),
    (4, 3, 4, 4, 2),
]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def decode(
    batch: PagedBatch,
    *,
    q_len_per_req: int,
    provider: str = "torch",
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    return trtllm_batch_decode_with_kv_cache(
        query=batch.query,
        k_cache=batch.k_cache,
        v_cache=batch.v_cache,
        block_tables=batch.block_tables,
        seq_lens=batch.seq_lens,
        max_seq_len=int(batch.seq_lens.max()),
        softmax_scale=batch.softmax_scale,
        q_len_per_req=q_len_per_req,
        out=out,
        provider=provider,
    )


def context(
    batch: PagedBatch,
    *,
    batch_size: int | None = None,
    provider: str = "torch",
    cum_seq_lens_q: torch.Tensor | None = None,
) -> torch.Tensor:
    cum = batch.cum_seq_lens_q if cum_seq_lens_q is None else cum_seq_lens_q
    return trtllm_batch_context_with_kv_cache(
        query=batch.query,
        k_cache=batch.k_cache,
        v_cache=batch.v_cache,
        block_tables=batch.block_tables,
        seq_lens=batch.seq_lens,
        max_q_len=max(batch.q_lens),
        max_kv_len=int(batch.seq_lens.max()),
        softmax_scale=batch.softmax_scale,
        batch_size=len(batch.q_lens) if batch_size is None else batch_size,
        cum_seq_lens_q=cum,
        cum_seq_lens_kv=cum,
        provider=provider,
    )


def decode_batch(shape: tuple[int, ...], dtype: torch.dtype, *, seed: int = 0) -> PagedBatch:
    bs, q_len, page_size, heads, kv_heads = shape
    kv_lens = [q_len + 2 + 7 * b for b in range(bs)]
    return make_batch(
        q_lens=[q_len] * bs,
        kv_lens=kv_lens,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=16,
        page_size=page_size,
        dtype=dtype,
        seed=seed,
    )


def small_batch(*, q_lens: list[int], kv_lens: list[int]) -> PagedBatch:
    return make_batch(
        q_lens=q_lens,
        kv_lens=kv_lens,
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        page_size=4,
        dtype=torch.float32,
        seed=3,
    )


def test_default_provider_is_torch_on_cpu_and_triton_on_cuda() -> None:
    assert default_provider(torch.device("cpu")) == "torch"
    assert default_provider("cuda") == "triton"
    assert default_provider(torch.device("cuda", 1)) == "triton"


def test_unknown_provider_error_names_the_choices() -> None:
    batch = small_batch(q_lens=[1], kv_lens=[3])
    with pytest.raises(
        KernelContractError,
        match=re.escape("unknown trtllm_fmha provider 'cudnn'; choices: torch, triton, flashinfer"),
    ):
        decode(batch, q_len_per_req=1, provider="cudnn")


def test_flashinfer_provider_on_cpu_is_refused_with_the_cpu_choices() -> None:
    batch = small_batch(q_lens=[2], kv_lens=[3])
    with pytest.raises(
        KernelContractError,
        match=re.escape(
            "provider 'flashinfer' needs CUDA tensors, got device cpu; choices on CPU: "
            "torch, triton (with TRITON_INTERPRET=1)"
        ),
    ):
        context(batch, provider="flashinfer")


def test_triton_provider_on_cpu_without_interpreter_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    batch = small_batch(q_lens=[1], kv_lens=[3])
    with pytest.raises(
        KernelContractError,
        match=re.escape(
            "provider 'triton' on device cpu needs TRITON_INTERPRET=1 set before triton is "
            "imported; choices on CPU: torch, triton (interpreted)"
        ),
    ):
        decode(batch, q_len_per_req=1, provider="triton")


def test_head_counts_that_do_not_group_are_rejected() -> None:
    batch = make_batch(
        q_lens=[1],
        kv_lens=[3],
        num_heads=3,
        num_kv_heads=2,
        head_dim=16,
        page_size=1,
        dtype=torch.float32,
        seed=0,
    )
    with pytest.raises(
        KernelContractError,
        match=re.escape(
            "expected head_dim 16 in k_cache and Hq=3 a multiple of Hkv=2, got k_cache "
            "(6, 1, 2, 16)"
        ),
    ):
        decode(batch, q_len_per_req=1)


def test_int64_block_tables_are_rejected() -> None:
    batch = small_batch(q_lens=[1], kv_lens=[3])
    with pytest.raises(
        KernelContractError,
        match=re.escape(
            "expected block_tables int32 [bs, max_pages] and seq_lens [bs], got block_tables "
            "torch.int64 (1, 3), seq_lens (1,)"
        ),
    ):
        trtllm_batch_decode_with_kv_cache(
            query=batch.query,
            k_cache=batch.k_cache,
            v_cache=batch.v_cache,
            block_tables=batch.block_tables.long(),
            seq_lens=batch.seq_lens,
            max_seq_len=3,
            softmax_scale=1.0,
        )


def test_out_of_another_dtype_is_rejected() -> None:
    batch = small_batch(q_lens=[1], kv_lens=[3])
    with pytest.raises(
        KernelContractError,
        match=re.escape("out must be [rows, 2, 16] of torch.float32, got torch.float16 (1, 2, 16)"),
    ):
        decode(batch, q_len_per_req=1, out=torch.zeros(1, 2, 16, dtype=torch.float16))


def test_zero_query_rows_per_request_and_negative_batch_size_are_rejected() -> None:
    batch = small_batch(q_lens=[1], kv_lens=[3])
    with pytest.raises(KernelContractError, match=r"^q_len_per_req must be >= 1, got 0$"):
        decode(batch, q_len_per_req=0)
    with pytest.raises(KernelContractError, match=r"^batch_size must be >= 0, got -1$"):
        context(batch, batch_size=-1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_reference_decode_matches_dense_attention(
    shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    bs, q_len, _, heads, _ = shape
    batch = decode_batch(shape, dtype, seed=bs + q_len)
    result = decode(batch, q_len_per_req=q_len)
    assert result.shape == (bs * q_len, heads, 16)
    assert not torch.isnan(result).any()
    assert_matches(result, naive_attention(batch), rel=rel_tolerance(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("page_size", [1, 4])
def test_reference_context_matches_dense_attention(page_size: int, dtype: torch.dtype) -> None:
    batch = make_batch(
        q_lens=[5, 1, 17, 3],
        kv_lens=[5, 9, 40, 3],
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        page_size=page_size,
        dtype=dtype,
        seed=7,
    )
    result = context(batch)
    assert not torch.isnan(result).any()
    assert_matches(result, naive_attention(batch), rel=rel_tolerance(dtype))


def test_decode_writes_into_the_given_out_and_returns_it() -> None:
    batch = small_batch(q_lens=[1, 1], kv_lens=[3, 6])
    out = torch.zeros(2, 2, 16)
    assert decode(batch, q_len_per_req=1, out=out) is out
    assert_matches(out, naive_attention(batch), rel=1e-5)


def test_decode_over_an_empty_kv_range_gives_nan_unguarded() -> None:
    batch = small_batch(q_lens=[1, 1], kv_lens=[0, 5])
    result = decode(batch, q_len_per_req=1)
    assert torch.isnan(result[0]).all()
    assert not torch.isnan(result[1]).any()


def test_decode_first_draft_row_sees_no_key_when_seq_len_is_below_q_len() -> None:
    batch = small_batch(q_lens=[3], kv_lens=[2])  # row i sees keys [0, i - 1]
    result = decode(batch, q_len_per_req=3)
    assert torch.isnan(result[0]).all()
    assert_matches(result, naive_attention(batch), rel=1e-5)


def test_context_rows_before_the_kv_start_give_nan() -> None:
    batch = small_batch(q_lens=[3, 2], kv_lens=[1, 4])  # request 0: rows 0, 1 see no key
    result = context(batch)
    assert torch.isnan(result[:2]).all()
    assert not torch.isnan(result[2:]).any()
    assert_matches(result, naive_attention(batch), rel=1e-5)


def test_context_leaves_rows_no_request_covers_at_zero() -> None:
    batch = small_batch(q_lens=[2, 3], kv_lens=[4, 5])
    result = context(batch, batch_size=1)
    assert torch.equal(result[2:], torch.zeros_like(result[2:]))
    assert_matches(result[:2], naive_attention(batch)[:2], rel=1e-5)


def test_decode_reading_past_the_query_raises_index_error() -> None:
    # DRAFT_EXTEND routed to decode: 3 requests x q_len 4 = 12 rows, query holds 10.
    batch = small_batch(q_lens=[1, 3, 2, 4], kv_lens=[5, 7, 6, 8])
    with pytest.raises(
        IndexError,
        match=re.escape(
            "trtllm decode: index 10 is out of bounds for query with 10 rows (the GPU kernel "
            "would access memory out of bounds)"
        ),
    ):
        decode(batch, q_len_per_req=4, out=torch.zeros_like(batch.query))


def test_decode_writing_past_the_out_raises_index_error() -> None:
    batch = small_batch(q_lens=[2, 2], kv_lens=[5, 7])
    with pytest.raises(
        IndexError, match=re.escape("trtllm decode: index 2 is out of bounds for out with 2 rows")
    ):
        decode(batch, q_len_per_req=2, out=torch.zeros(2, 2, 16))


def test_decode_past_the_out_inside_its_allocation_writes_there_as_a_gpu_kernel_does() -> None:
    # The GPU kernel has no bounds check: past `out`'s end but inside its allocation (here a
    # larger storage, as a redzone would be) it writes, and only outside it faults.
    batch = small_batch(q_lens=[2, 2], kv_lens=[5, 7])
    storage = torch.full((4, 2, 16), -7.0)
    out = storage[:2]
    decode(batch, q_len_per_req=2, out=out)
    expected = naive_attention(small_batch(q_lens=[2, 2], kv_lens=[5, 7]))
    assert_matches(out, expected[:2], rel=1e-5)
    assert_matches(storage[2:], expected[2:], rel=1e-5)  # rows 2..3: written past the end


def test_context_batch_size_past_the_metadata_raises_index_error() -> None:
    # DP padding: 2 real requests, batch_size padded to 3.
    batch = small_batch(q_lens=[2, 3], kv_lens=[4, 5])
    with pytest.raises(
        IndexError,
        match=re.escape("trtllm context: index 3 is out of bounds for cum_seq_lens_q with 3 rows"),
    ):
        context(batch, batch_size=3)


def test_context_reading_past_seq_lens_raises_index_error() -> None:
    batch = small_batch(q_lens=[2, 3], kv_lens=[4, 5])
    cum = torch.tensor([0, 2, 5, 5], dtype=torch.int32)  # cum_seq_lens_q long enough
    with pytest.raises(
        IndexError,
        match=re.escape("trtllm context: index 2 is out of bounds for seq_lens with 2 rows"),
    ):
        context(batch, batch_size=3, cum_seq_lens_q=cum)


def test_context_negative_query_start_raises_instead_of_wrapping() -> None:
    batch = small_batch(q_lens=[2, 3], kv_lens=[4, 5])
    poisoned = torch.tensor([-1, 2, 5], dtype=torch.int32)  # -1: a poisoned int buffer
    with pytest.raises(
        IndexError,
        match=re.escape("trtllm context: index -1 is out of bounds for query with 5 rows"),
    ):
        context(batch, cum_seq_lens_q=poisoned)


def test_negative_page_index_raises_instead_of_wrapping() -> None:
    batch = small_batch(q_lens=[1], kv_lens=[6])
    batch.block_tables[0, 1] = -1
    with pytest.raises(
        IndexError,
        match=re.escape(
            "trtllm decode: request 0 page index -1 is out of bounds for a KV pool of 5 pages"
        ),
    ):
        decode(batch, q_len_per_req=1)


def test_kv_length_past_the_page_table_raises_index_error() -> None:
    batch = small_batch(q_lens=[1], kv_lens=[6])  # 2 pages used, table has 4 columns
    batch.seq_lens[0] = 17
    with pytest.raises(
        IndexError,
        match=re.escape("trtllm decode: request 0 needs 5 pages but block_tables has 4 columns"),
    ):
        decode(batch, q_len_per_req=1)


def test_context_reading_past_a_guarded_cum_seq_lens_q_names_the_read_of_its_redzone() -> None:
    # DP padding over guarded metadata (as under --auto-detect): the read of entry 3 of a
    # 3-entry cum_seq_lens_q lies in its redzone and is reported before the value is used.
    batch = small_batch(q_lens=[2, 3], kv_lens=[4, 5])
    cum = buffers.guarded_buffer((3,), dtype=torch.int32, device="cpu", name="cu_q", fill=0)
    cum.copy_(batch.cum_seq_lens_q)
    with pytest.raises(RedzoneRead) as raised:
        context(batch, batch_size=3, cum_seq_lens_q=cum)
    assert str(raised.value) == (
        "1 site hit: redzone of buffer cu_q: 4 bytes read by trtllm context kernel: "
        "cum_seq_lens_q[3], first at byte 0 past its end (12-byte buffer on cpu)"
    )


def test_decode_writing_past_a_guarded_out_is_left_to_the_redzone_comparison() -> None:
    # Rows written past the end are not reads: check() finds them in the redzone.
    batch = small_batch(q_lens=[2, 2], kv_lens=[5, 7])
    out = buffers.guarded_buffer((2, 2, 16), dtype=torch.float32, device="cpu", name="o", fill=0)
    try:
        decode(batch, q_len_per_req=2, out=out)
        with pytest.raises(RedzoneViolation) as raised:
            detect.check()
        assert type(raised.value) is RedzoneViolation  # not a read
        assert str(raised.value) == (  # rows 2..3: 256 bytes, 3 of them equal to the canary
            "1 site hit: redzone of buffer o: 253 bytes overwritten, first at byte 0 past its end "
            "(256-byte buffer on cpu)"
        )
    finally:
        detect.reset()

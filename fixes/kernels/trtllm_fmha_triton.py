"""Triton paged decode (split-KV) and causal context kernels under the TRT-LLM FMHA contract."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton

from fixes.errors import KernelContractError
from fixes.kernels.trtllm_fmha_contract import ContextArgs, DecodeArgs, PagedAttentionArgs
from fixes.kernels.trtllm_fmha_tiles import (
    PACK_MAX_Q_LEN,
    SHORT_Q,
    TritonBlockConfig,
    choose_num_splits,
    context_launch,
    decode_launch,
    pow2_floor,
)
from fixes.kernels.trtllm_fmha_triton_kernels import (
    combine_splits_kernel,
    context_kernel,
    decode_kernel,
)

__all__ = ["TritonBlockConfig", "triton_context", "triton_decode"]

_LOG2E = 1.4426950408889634


def triton_decode(args: DecodeArgs, *, config: TritonBlockConfig | None = None) -> torch.Tensor:
    """Decode kernel: one program per (request, KV head, KV split) holding up to 64 rows of
    (query row, head in the GQA group), so draft rows share each K/V read; see trtllm_fmha."""
    _check_layout(args)
    batch = args.seq_lens.shape[0]
    if batch * args.q_len_per_req == 0:
        return args.out
    window = _PackedWindow(
        batch=batch, q_window=args.q_len_per_req, cum_seq_lens_q=None, max_kv_len=args.max_seq_len
    )
    return _launch_packed(args, window=window, config=config or TritonBlockConfig())


def triton_context(args: ContextArgs, *, config: TritonBlockConfig | None = None) -> torch.Tensor:
    """Context kernel: one program per (query block, request, query head); windows of at most
    `context_pack_max_q_len` rows run the decode kernel's packed tiles instead, with each
    request's q_len read from cum_seq_lens_q (draft extend); see trtllm_fmha."""
    _check_layout(args)
    config = config or TritonBlockConfig()
    batch_size, max_q_len = args.batch_size, args.max_q_len
    if batch_size == 0 or max_q_len <= 0:
        return args.out
    pack_limit = (
        PACK_MAX_Q_LEN if config.context_pack_max_q_len is None else (config.context_pack_max_q_len)
    )
    if max_q_len <= pack_limit:
        window = _PackedWindow(
            batch=batch_size,
            q_window=max_q_len,
            cum_seq_lens_q=args.cum_seq_lens_q,
            max_kv_len=args.max_kv_len,
        )
        return _launch_packed(args, window=window, config=config)
    query, k_cache, v_cache, out = args.query, args.k_cache, args.v_cache, args.out
    block_tables, num_heads = args.block_tables, query.shape[1]
    block_m, block_n, num_warps, num_stages = context_launch(config, query, max_q_len=max_q_len)
    heads_fastest = (
        max_q_len <= SHORT_Q
        if config.context_heads_fastest is None
        else config.context_heads_fastest
    )
    num_blocks = triton.cdiv(max_q_len, block_m)
    grid = (
        (num_heads, num_blocks, batch_size)
        if heads_fastest
        else (num_blocks, batch_size, num_heads)
    )
    context_kernel[grid](
        query,
        k_cache,
        v_cache,
        block_tables,
        args.seq_lens,
        args.cum_seq_lens_q,
        out,
        args.softmax_scale * _LOG2E,
        max_q_len,
        *_paged_strides(args),
        GROUP=num_heads // k_cache.shape[2],
        HEAD_DIM=query.shape[2],
        PAGE_SIZE=k_cache.shape[1],
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        HEADS_FASTEST=heads_fastest,
        PRECISION=_dot_precision(query.dtype),
        UPCAST_DOT=_upcast_dot(query),
        num_warps=num_warps,
        num_stages=num_stages,
    )
    return out


@dataclass(frozen=True)
class _PackedWindow:
    """Host ints (and the row offsets, VARLEN only) of a packed decode-style launch."""

    batch: int
    q_window: int  # query rows per request: q_len_per_req, or max_q_len when VARLEN
    cum_seq_lens_q: torch.Tensor | None  # None: request b owns rows [b * q_window, ...)
    max_kv_len: int


def _launch_packed(
    args: PagedAttentionArgs, *, window: _PackedWindow, config: TritonBlockConfig
) -> torch.Tensor:
    """Decode kernel (and split merge) over `window`; every choice is made from host ints."""
    query, k_cache, v_cache, out = args.query, args.k_cache, args.v_cache, args.out
    block_tables, seq_lens = args.block_tables, args.seq_lens
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    group = query.shape[1] // num_kv_heads
    q_rows = min(triton.next_power_of_2(window.q_window), max(1, pow2_floor(64 // group)))
    chunks_per_req = triton.cdiv(window.q_window, q_rows)
    programs = window.batch * chunks_per_req
    block_n, num_warps, num_stages = decode_launch(
        config, query, kv_programs=programs * num_kv_heads, max_seq_len=window.max_kv_len
    )
    splits = config.num_kv_splits or choose_num_splits(
        programs=programs * num_kv_heads,
        max_seq_len=window.max_kv_len,
        block_n=block_n,
        device=query.device,
    )
    chunk = triton.cdiv(triton.cdiv(max(window.max_kv_len, 1), splits), block_n) * block_n
    slot_rows = window.batch * window.q_window
    partial_out, partial_lse = _split_buffers(out, rows=slot_rows, splits=splits)
    varlen = window.cum_seq_lens_q is not None
    cum_seq_lens_q = window.cum_seq_lens_q if varlen else seq_lens  # placeholder: unread
    decode_kernel[(programs, num_kv_heads, splits)](
        query,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        cum_seq_lens_q,
        out,
        partial_out,
        partial_lse,
        window.q_window,
        chunks_per_req,
        args.softmax_scale * _LOG2E,
        chunk,
        splits,
        query.shape[1],
        *_paged_strides(args),
        GROUP=group,
        Q_ROWS=q_rows,
        TILE_M=max(16, triton.next_power_of_2(q_rows * group)),
        HEAD_DIM=head_dim,
        PAGE_SIZE=k_cache.shape[1],
        BLOCK_N=block_n,
        SPLIT=splits > 1,
        VARLEN=varlen,
        PRECISION=_dot_precision(query.dtype),
        UPCAST_DOT=_upcast_dot(query),
        num_warps=num_warps,
        num_stages=num_stages,
    )
    if splits > 1:
        combine_splits_kernel[(slot_rows, query.shape[1])](
            partial_out,
            partial_lse,
            cum_seq_lens_q,
            out,
            splits,
            window.q_window,
            out.stride(0),
            out.stride(1),
            HEAD_DIM=head_dim,
            SPLITS_PAD=triton.next_power_of_2(splits),
            VARLEN=varlen,
            num_warps=4,
        )
    return out


def _paged_strides(args: PagedAttentionArgs) -> tuple[int, ...]:
    """The strides both kernels take, in their order: query (row, head), K and V caches
    (page, slot, head), block-table row, output (row, head)."""
    query, k_cache, v_cache, out = args.query, args.k_cache, args.v_cache, args.out
    return (
        *query.stride()[:2],
        *k_cache.stride()[:3],
        *v_cache.stride()[:3],
        args.block_tables.stride(0),
        *out.stride()[:2],
    )


def _split_buffers(
    out: torch.Tensor, *, rows: int, splits: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 per-split outputs [rows, Hq, splits, D] and log2-sum-exps; `out` twice if 1 split."""
    if splits == 1:
        return out, out  # placeholders the kernel never touches
    num_heads, head_dim = out.shape[1], out.shape[2]
    partial_out = torch.empty(
        (rows, num_heads, splits, head_dim), dtype=torch.float32, device=out.device
    )
    partial_lse = torch.empty((rows, num_heads, splits), dtype=torch.float32, device=out.device)
    return partial_out, partial_lse


def _dot_precision(dtype: torch.dtype) -> str:
    """fp32 inputs use exact IEEE products (TF32 would lose ~1e-3); 16-bit use tensor cores."""
    return "ieee" if dtype == torch.float32 else "tf32"


def _upcast_dot(query: torch.Tensor) -> bool:
    """The Triton 3.9 interpreter multiplies bf16 tiles as raw integers: widen them there."""
    return not query.is_cuda and query.dtype != torch.float32


def _check_layout(args: PagedAttentionArgs) -> None:
    """Power-of-two head_dim >= 16 (tile width) and unit stride along the last dimension."""
    query = args.query
    head_dim = query.shape[2]
    if head_dim < 16 or head_dim & (head_dim - 1):
        raise KernelContractError(
            f"the triton provider needs head_dim a power of two >= 16, got {head_dim}; "
            "choices for other sizes: torch, flashinfer"
        )
    strides = {
        name: t.stride(-1)
        for name, t in (
            ("query", query),
            ("k_cache", args.k_cache),
            ("v_cache", args.v_cache),
            ("out", args.out),
            ("block_tables", args.block_tables),
        )
    }
    if any(stride != 1 for stride in strides.values()):
        raise KernelContractError(
            f"the triton provider needs unit stride along the last dimension, got {strides}; "
            "choices: make them contiguous, or provider torch"
        )

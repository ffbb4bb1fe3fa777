"""TRT-LLM FMHA paged decode and context attention, dispatched to torch, Triton or flashinfer."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from fixes.errors import KernelContractError
from fixes.kernels.trtllm_fmha_contract import (
    PROVIDERS,
    ContextArgs,
    DecodeArgs,
    PagedAttentionArgs,
    default_provider,
)

__all__ = [
    "PROVIDERS",
    "default_provider",
    "trtllm_batch_context_with_kv_cache",
    "trtllm_batch_decode_with_kv_cache",
]

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def trtllm_batch_decode_with_kv_cache(
    *,
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    max_seq_len: int,
    softmax_scale: float,
    q_len_per_req: int = 1,
    out: torch.Tensor | None = None,
    provider: str | None = None,
) -> torch.Tensor:
    """Paged decode: `bs = seq_lens.shape[0]` requests of `q_len_per_req` query rows each.

    Reads query rows `b*q_len_per_req + i` with no check against `query.shape[0]`;
    `seq_lens[b]` counts the request's KV tokens including its new ones; query i attends
    keys `[0, seq_lens[b] - q_len_per_req + i]`. An empty range gives NaN (0/0).
    Returns `[bs*q_len_per_req, Hq, D]`, written into `out` when given. `max_seq_len`
    only sizes work splitting. `provider` None means `default_provider(query.device)`.
    """
    chosen = _resolve_provider(provider, query.device)
    if q_len_per_req < 1:
        raise KernelContractError(f"q_len_per_req must be >= 1, got {q_len_per_req}")
    rows = seq_lens.shape[0] * q_len_per_req
    paged = _checked_args(
        query, k_cache, v_cache, block_tables, seq_lens, softmax_scale, out, out_rows=rows
    )
    decode, _ = _provider_functions(chosen)
    return decode(paged.for_decode(q_len_per_req=q_len_per_req, max_seq_len=max_seq_len))


def trtllm_batch_context_with_kv_cache(
    *,
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    max_q_len: int,
    max_kv_len: int,
    softmax_scale: float,
    batch_size: int,
    cum_seq_lens_q: torch.Tensor,
    cum_seq_lens_kv: torch.Tensor,
    out: torch.Tensor | None = None,
    provider: str | None = None,
) -> torch.Tensor:
    """Paged causal context attention over requests `b < batch_size`, unchecked.

    Reads `cum_seq_lens_q[b]`, `cum_seq_lens_q[b+1]`, `seq_lens[b]`, `block_tables[b]`
    with no bounds checks; query i of request b attends keys `[0, seq_lens[b] - q_len_b + i]`
    (NaN when empty). KV lengths come from `seq_lens`; `cum_seq_lens_kv` is accepted for
    contract parity. Rows past `max_q_len` within a request are not computed. Returns a
    tensor shaped like `query` (`out` when given; rows no request covers are zero when
    `out` is allocated here, untouched otherwise). `provider` None: `default_provider`.
    """
    chosen = _resolve_provider(provider, query.device)
    if batch_size < 0:
        raise KernelContractError(f"batch_size must be >= 0, got {batch_size}")
    paged = _checked_args(
        query, k_cache, v_cache, block_tables, seq_lens, softmax_scale, out, out_rows=None
    )
    _, context = _provider_functions(chosen)
    return context(
        paged.for_context(
            batch_size=batch_size,
            cum_seq_lens_q=cum_seq_lens_q,
            max_q_len=max_q_len,
            max_kv_len=max_kv_len,
        )
    )


def _provider_functions(
    provider: str,
) -> tuple[Callable[[DecodeArgs], torch.Tensor], Callable[[ContextArgs], torch.Tensor]]:
    """The decode and context functions of a validated provider (imported on first use)."""
    if provider == "torch":
        from fixes.kernels import trtllm_fmha_reference as reference

        return reference.decode_reference, reference.context_reference
    if provider == "triton":
        from fixes.kernels import trtllm_fmha_triton as triton_kernels

        return triton_kernels.triton_decode, triton_kernels.triton_context
    from fixes.kernels import flashinfer_mha

    return flashinfer_mha.flashinfer_decode, flashinfer_mha.flashinfer_context


def _resolve_provider(provider: str | None, device: torch.device) -> str:
    """The provider to run, validated against the device it must run on."""
    chosen = default_provider(device) if provider is None else provider
    if chosen not in PROVIDERS:
        raise KernelContractError(
            f"unknown trtllm_fmha provider {chosen!r}; choices: {', '.join(PROVIDERS)}"
        )
    on_cpu = device.type != "cuda"
    if chosen == "flashinfer" and on_cpu:
        raise KernelContractError(
            f"provider 'flashinfer' needs CUDA tensors, got device {device}; "
            "choices on CPU: torch, triton (with TRITON_INTERPRET=1)"
        )
    if chosen == "triton" and on_cpu and os.environ.get("TRITON_INTERPRET") != "1":
        raise KernelContractError(
            f"provider 'triton' on device {device} needs TRITON_INTERPRET=1 set before "
            "triton is imported; choices on CPU: torch, triton (interpreted)"
        )
    return chosen


def _checked_args(  # noqa: PLR0917 (the kernels' own argument order)
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    softmax_scale: float,
    out: torch.Tensor | None,
    *,
    out_rows: int | None,
) -> PagedAttentionArgs:
    """The inputs bundled for a provider, after host-side shape, dtype and device checks
    (never the bounds the contract leaves out). A missing `out` is allocated after the
    checks: `[out_rows, Hq, D]` uninitialised (decode), or zeros shaped like `query`
    (context, `out_rows` None)."""
    if query.dim() != 3 or k_cache.dim() != 4:
        raise KernelContractError(
            f"expected query [tokens, Hq, D] and k_cache [pages, page_size, Hkv, D], got "
            f"query {tuple(query.shape)} and k_cache {tuple(k_cache.shape)}"
        )
    if v_cache.shape != k_cache.shape:
        raise KernelContractError(
            f"v_cache shape {tuple(v_cache.shape)} must equal k_cache shape {tuple(k_cache.shape)}"
        )
    num_heads, head_dim = query.shape[1], query.shape[2]
    num_kv_heads = k_cache.shape[2]
    if k_cache.shape[3] != head_dim or num_heads % num_kv_heads != 0:
        raise KernelContractError(
            f"expected head_dim {head_dim} in k_cache and Hq={num_heads} a multiple of "
            f"Hkv={num_kv_heads}, got k_cache {tuple(k_cache.shape)}"
        )
    if query.dtype not in _DTYPES or k_cache.dtype != query.dtype or v_cache.dtype != query.dtype:
        raise KernelContractError(
            f"query, k_cache and v_cache must share one dtype of float32, float16, bfloat16; "
            f"got {query.dtype}, {k_cache.dtype}, {v_cache.dtype}"
        )
    if block_tables.dim() != 2 or block_tables.dtype != torch.int32 or seq_lens.dim() != 1:
        raise KernelContractError(
            f"expected block_tables int32 [bs, max_pages] and seq_lens [bs], got block_tables "
            f"{block_tables.dtype} {tuple(block_tables.shape)}, seq_lens {tuple(seq_lens.shape)}"
        )
    if out is not None and (out.shape[1:] != query.shape[1:] or out.dtype != query.dtype):
        raise KernelContractError(
            f"out must be [rows, {num_heads}, {head_dim}] of {query.dtype}, got "
            f"{out.dtype} {tuple(out.shape)}"
        )
    tensors = (k_cache, v_cache, block_tables, seq_lens) + (() if out is None else (out,))
    if any(t.device != query.device for t in tensors):
        raise KernelContractError(
            f"all tensors must be on query's device {query.device}; got "
            f"{sorted({str(t.device) for t in tensors})}"
        )
    if out is None and out_rows is None:
        out = torch.zeros_like(query)
    elif out is None:
        shape = (int(out_rows or 0), *query.shape[1:])
        out = torch.empty(shape, dtype=query.dtype, device=query.device)
    return PagedAttentionArgs(
        query=query,
        k_cache=k_cache,
        v_cache=v_cache,
        block_tables=block_tables,
        seq_lens=seq_lens,
        softmax_scale=softmax_scale,
        out=out,
    )

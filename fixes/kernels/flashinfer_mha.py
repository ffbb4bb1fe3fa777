"""flashinfer provider of the TRT-LLM FMHA contract: paged decode and causal prefill (GPU)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from fixes.errors import KernelContractError
from fixes.kernels.trtllm_fmha_contract import (
    PROVIDERS,
    ContextArgs,
    DecodeArgs,
    PagedAttentionArgs,
)

__all__ = ["PagedLayout", "flashinfer_context", "flashinfer_decode", "paged_layout"]

logger = logging.getLogger(__name__)

_WORKSPACE_BYTES = 128 * 1024 * 1024
PREFILL_BACKEND = "fa2"  # "fa3" also runs on H100 (flashinfer 0.7.2)


@dataclass(frozen=True)
class PagedLayout:
    """flashinfer's CSR page layout of a batch: int32 device tensors."""

    kv_indptr: torch.Tensor  # [bs + 1], page offsets into kv_indices
    kv_indices: torch.Tensor  # [kv_indptr[-1]], page ids
    kv_last_page_len: torch.Tensor  # [bs], tokens in each request's last page (0 if empty)


@dataclass
class _DeviceWrappers:
    """One zeroed workspace and the wrappers planned on it, per device."""

    workspace: torch.Tensor
    wrappers: dict[str, Any] = field(default_factory=dict)


_STATE: dict[torch.device, _DeviceWrappers] = {}


def paged_layout(
    *, block_tables: torch.Tensor, kv_lens: torch.Tensor, page_size: int
) -> PagedLayout:
    """Converts block_tables rows and KV lengths to flashinfer's indptr/indices/last_page_len.

    Synchronises with the host once (the lengths are read to size `kv_indices`; flashinfer's
    plan() copies indptr to the host anyway). A negative length counts as an empty range.
    Raises IndexError where the TRT-LLM kernel would read past `block_tables`.
    """
    batch = kv_lens.shape[0]
    if batch > block_tables.shape[0]:
        raise IndexError(
            f"flashinfer provider: {batch} requests but block_tables has "
            f"{block_tables.shape[0]} rows (the GPU kernel would read out of bounds)"
        )
    lens = kv_lens.to("cpu", torch.int64).clamp(min=0)
    pages = (lens + page_size - 1) // page_size
    if batch and int(pages.max()) > block_tables.shape[1]:
        raise IndexError(
            f"flashinfer provider: a request needs {int(pages.max())} pages but block_tables "
            f"has {block_tables.shape[1]} columns"
        )
    indptr = torch.zeros(batch + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(pages, 0)
    last = torch.where(pages > 0, lens - (pages - 1) * page_size, torch.zeros_like(lens))
    used = torch.arange(block_tables.shape[1])[None, :] < pages[:, None]
    indices = block_tables[:batch][used.to(block_tables.device)]
    device = block_tables.device
    return PagedLayout(
        kv_indptr=indptr.to(device, torch.int32),
        kv_indices=indices.to(torch.int32),
        kv_last_page_len=last.to(device, torch.int32),
    )


def flashinfer_decode(args: DecodeArgs) -> torch.Tensor:
    """Decode through BatchDecodeWithPagedKVCacheWrapper (q_len_per_req 1) or the causal
    paged prefill wrapper (q_len_per_req > 1). Plans on every call: host sync, so not for
    use inside CUDA graph capture. Empty KV ranges give 0 here, not NaN (flashinfer masks).
    """
    query, k_cache, q_len_per_req = args.query, args.k_cache, args.q_len_per_req
    batch = args.seq_lens.shape[0]
    rows = batch * q_len_per_req
    _require_rows(query, rows, "query")
    _require_rows(args.out, rows, "out")
    layout = paged_layout(
        block_tables=args.block_tables, kv_lens=args.seq_lens, page_size=k_cache.shape[1]
    )
    if q_len_per_req == 1:
        group = query.shape[1] // k_cache.shape[2]
        wrapper = _wrapper(query.device, "decode_tc" if group >= 4 else "decode")
        wrapper.plan(
            layout.kv_indptr,
            layout.kv_indices,
            layout.kv_last_page_len,
            *_head_shape(args),
            q_data_type=query.dtype,
            kv_data_type=k_cache.dtype,
            sm_scale=args.softmax_scale,
        )
        wrapper.run(query[:rows], (k_cache, args.v_cache), out=args.out[:rows])
        return args.out
    qo_indptr = torch.arange(batch + 1, dtype=torch.int32, device=query.device)
    return _run_prefill(args, qo_indptr=qo_indptr * q_len_per_req, layout=layout, rows=(0, rows))


def flashinfer_context(args: ContextArgs) -> torch.Tensor:
    """Causal paged prefill (BatchPrefillWithPagedKVCacheWrapper, FA2) over `batch_size`
    requests. Plans on every call (host sync). Every query row of a request is computed,
    even past `max_q_len`. Empty KV ranges give 0 here, not NaN.
    """
    batch_size, cum_seq_lens_q, seq_lens = args.batch_size, args.cum_seq_lens_q, args.seq_lens
    if batch_size + 1 > cum_seq_lens_q.shape[0] or batch_size > seq_lens.shape[0]:
        raise IndexError(
            f"flashinfer provider: batch_size={batch_size} reads cum_seq_lens_q[{batch_size}] "
            f"and seq_lens[{batch_size - 1}], past their {cum_seq_lens_q.shape[0]} and "
            f"{seq_lens.shape[0]} entries (the GPU kernel would read out of bounds)"
        )
    if batch_size == 0:
        return args.out
    qo_indptr = cum_seq_lens_q[: batch_size + 1].to(torch.int32)
    start, end = (int(x) for x in qo_indptr[[0, -1]].tolist())
    _require_rows(args.query, end, "query")
    _require_rows(args.out, end, "out")
    layout = paged_layout(
        block_tables=args.block_tables,
        kv_lens=seq_lens[:batch_size],
        page_size=args.k_cache.shape[1],
    )
    return _run_prefill(args, qo_indptr=qo_indptr - start, layout=layout, rows=(start, end))


def _run_prefill(
    args: PagedAttentionArgs,
    *,
    qo_indptr: torch.Tensor,
    layout: PagedLayout,
    rows: tuple[int, int],
) -> torch.Tensor:
    """Causal paged prefill of query rows `[rows[0], rows[1])` into the same rows of `out`."""
    wrapper = _wrapper(args.query.device, "prefill")
    wrapper.plan(
        qo_indptr,
        layout.kv_indptr,
        layout.kv_indices,
        layout.kv_last_page_len,
        *_head_shape(args),
        causal=True,
        sm_scale=args.softmax_scale,
        q_data_type=args.query.dtype,
        kv_data_type=args.k_cache.dtype,
    )
    start, end = rows
    wrapper.run(args.query[start:end], (args.k_cache, args.v_cache), out=args.out[start:end])
    return args.out


def _head_shape(args: PagedAttentionArgs) -> tuple[int, int, int, int]:
    """(Hq, Hkv, D, page_size), the order flashinfer's plan() takes them in."""
    query, k_cache = args.query, args.k_cache
    return (query.shape[1], k_cache.shape[2], query.shape[2], k_cache.shape[1])


def _wrapper(device: torch.device, kind: str) -> Any:
    """The cached flashinfer wrapper of `kind` for `device` (imports flashinfer lazily)."""
    flashinfer = _import_flashinfer()
    state = _STATE.get(device)
    if state is None:
        workspace = torch.zeros(_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        state = _STATE[device] = _DeviceWrappers(workspace=workspace)
    if kind not in state.wrappers:
        if kind == "prefill":
            wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(
                state.workspace, "NHD", backend=PREFILL_BACKEND
            )
        else:
            wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                state.workspace, "NHD", use_tensor_cores=kind == "decode_tc"
            )
        state.wrappers[kind] = wrapper
        logger.debug("created flashinfer %s wrapper on %s", kind, device)
    return state.wrappers[kind]


def _import_flashinfer() -> Any:
    try:
        import flashinfer
    except ImportError as error:
        raise KernelContractError(
            f"provider 'flashinfer' needs the flashinfer package (pip install "
            f"'prtoggle[gpu]'): {error}; choices: {', '.join(PROVIDERS)}"
        ) from error
    return flashinfer


def _require_rows(tensor: torch.Tensor, rows: int, name: str) -> None:
    """flashinfer cannot read past a tensor's end as the TRT-LLM kernel would: IndexError."""
    if rows > tensor.shape[0]:
        raise IndexError(
            f"flashinfer provider: {rows} rows needed but {name} has {tensor.shape[0]} "
            "(the GPU kernel would access memory out of bounds)"
        )

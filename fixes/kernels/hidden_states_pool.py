"""Copy each request's last extend hidden states into its row of the hidden-state pool."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from fixes.errors import KernelContractError
from fixes.kernels.draft_kv_indices import storage_tail_view
from prtoggle import detect

PROVIDERS = ("triton", "torch")


@dataclass(frozen=True)
class _PoolAssignment:
    """What both providers read and write (see assign_hidden_states_pool)."""

    hidden_states: torch.Tensor  # [num_tokens, hidden], device
    req_pool_indices: torch.Tensor  # [>= num_seqs] int64, device: pool row of each request
    pool: torch.Tensor  # [rows, >= pool_size, hidden], device: written
    pool_size: int  # host: hidden states kept per request
    num_seqs: int  # host: requests, trusted against the index tensors
    extend_seq_lens: torch.Tensor  # [>= num_seqs] int32, device
    extend_start_loc: torch.Tensor  # [>= num_seqs] int32, device: first row of each request


def assign_hidden_states_pool(
    *,
    hidden_states: torch.Tensor,
    req_pool_indices: torch.Tensor,
    req_to_hidden_states_pool: torch.Tensor,
    pool_size: int,
    num_seqs: int,
    extend_seq_lens: torch.Tensor,
    extend_start_loc: torch.Tensor,
    provider: str = "triton",
) -> None:
    """Copy each request's last `pool_size` extend hidden states into its pool row.

    For `b < num_seqs` and `i < pool_size`: `pool[req_pool_indices[b], i] =
    hidden_states[end - pool_size + i]`, `end = extend_start_loc[b] + extend_seq_lens[b]`;
    `hidden_states` is `[num_tokens, hidden]`, the pool `[rows, >= pool_size, hidden]`.
    As in sglang, nothing is bounds-checked: `num_seqs` is trusted against the lengths
    of the index tensors, and the indices against the pool and the hidden states. The
    torch provider reads the per-request inputs through their storage (past a tensor's
    end into a redzone, as the kernel would) and raises IndexError where the kernel
    would touch memory outside the allocations.
    """
    if provider not in PROVIDERS:
        raise KernelContractError(
            f"assign_hidden_states_pool: provider {provider!r} is unknown: "
            f"expected one of {', '.join(PROVIDERS)}"
        )
    if num_seqs == 0 or pool_size == 0:
        return
    assign = _assign_torch if provider == "torch" else _assign_triton
    assign(
        _PoolAssignment(
            hidden_states=hidden_states,
            req_pool_indices=req_pool_indices,
            pool=req_to_hidden_states_pool,
            pool_size=pool_size,
            num_seqs=num_seqs,
            extend_seq_lens=extend_seq_lens,
            extend_start_loc=extend_start_loc,
        )
    )


def _assign_triton(args: _PoolAssignment) -> None:
    hidden_states, pool, pool_size = args.hidden_states, args.pool, args.pool_size
    hidden = int(hidden_states.shape[1])
    _assign_kernel[(args.num_seqs, pool_size)](
        hidden_states,
        args.req_pool_indices,
        pool,
        args.extend_seq_lens,
        args.extend_start_loc,
        hidden_states.stride(0),
        hidden_states.stride(1),
        pool.stride(0),
        pool.stride(1),
        pool.stride(2),
        hidden,
        HIDDEN_BLOCK=triton.next_power_of_2(hidden),
    )


def _assign_torch(args: _PoolAssignment) -> None:
    hidden_states, pool, pool_size = args.hidden_states, args.pool, args.pool_size
    num_seqs = args.num_seqs
    rows = _read_through_storage(args.req_pool_indices, num_seqs, name="req_pool_indices")
    lens = _read_through_storage(args.extend_seq_lens, num_seqs, name="extend_seq_lens")
    starts = _read_through_storage(args.extend_start_loc, num_seqs, name="extend_start_loc")
    for row, length, start in zip(rows, lens, starts, strict=True):
        first = start + length - pool_size
        if not 0 <= row < pool.shape[0]:
            raise IndexError(
                f"assign_hidden_states_pool: pool row {row} outside [0, {pool.shape[0]}) "
                "(req_pool_indices); the real kernel would write unowned memory"
            )
        if first < 0 or first + pool_size > hidden_states.shape[0]:
            raise IndexError(
                f"assign_hidden_states_pool: hidden-state rows [{first}, {first + pool_size}) "
                f"outside [0, {hidden_states.shape[0]}) (extend_start_loc {start}, "
                f"extend_seq_lens {length}); the real kernel would read unowned memory"
            )
        pool[row, :pool_size] = hidden_states[first : first + pool_size].to(pool.dtype)


def _read_through_storage(values: torch.Tensor, count: int, *, name: str) -> list[int]:
    """The first `count` entries at `values`' address, past its end if `count` is larger
    (through detect.check_read: RedzoneRead when they reach a guarded buffer's redzone)."""
    flat = storage_tail_view(values)
    if count > flat.numel():
        raise IndexError(
            f"assign_hidden_states_pool: reads {count} entries of {name}, whose allocation "
            f"holds {flat.numel()} (tensor length {values.numel()}); the real kernel would "
            "read unowned memory"
        )
    entries = flat[:count]
    detect.check_read(entries, reader=f"assign_hidden_states_pool: {name}[:{count}]")
    return [int(v) for v in entries.tolist()]


@triton.jit
def _assign_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    hidden_ptr,
    req_pool_indices_ptr,
    pool_ptr,
    extend_seq_lens_ptr,
    extend_start_loc_ptr,
    hidden_stride,
    hidden_dim_stride,
    pool_row_stride,
    pool_step_stride,
    pool_dim_stride,
    hidden_size,
    HIDDEN_BLOCK: tl.constexpr,
):
    req = tl.program_id(0)
    slot = tl.program_id(1)
    pool_size = tl.num_programs(1)
    end = tl.load(extend_start_loc_ptr + req).to(tl.int64) + tl.load(extend_seq_lens_ptr + req)
    source_row = end - pool_size + slot
    pool_row = tl.load(req_pool_indices_ptr + req).to(tl.int64)
    offs = tl.arange(0, HIDDEN_BLOCK)
    mask = offs < hidden_size
    values = tl.load(hidden_ptr + source_row * hidden_stride + offs * hidden_dim_stride, mask=mask)
    pool_at = pool_ptr + pool_row * pool_row_stride + slot * pool_step_stride
    tl.store(pool_at + offs * pool_dim_stride, values, mask=mask)

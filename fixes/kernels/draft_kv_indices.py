"""Per-step KV slot lists of multi-step EAGLE draft decoding (Triton kernel + torch reference)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from fixes.errors import KernelContractError

PROVIDERS = ("triton", "torch")


@dataclass(frozen=True)
class _KVIndicesArgs:
    """What both providers read and write (see generate_draft_decode_kv_indices)."""

    req_pool_indices: torch.Tensor  # [num_seqs] int64, device: req_to_token row of each request
    req_to_token: torch.Tensor  # [rows, max_context_len] int32, device
    seq_lens: torch.Tensor  # [num_seqs] int32, device: prefix length of each request
    kv_indices: torch.Tensor  # [num_steps, row_width] int32, device: written, unchecked
    kv_indptr: torch.Tensor  # [num_steps, >= num_seqs * topk + 1] int32, device: written
    topk: int  # host: branches per request
    page_size: int  # host


def draft_kv_indices_row_len(*, seq_lens_sum: int, topk: int, num_seqs: int, step: int) -> int:
    """Entries row `step` needs: every request's prefix per branch, plus `step + 1` drafts each."""
    return seq_lens_sum * topk + num_seqs * topk * (step + 1)


def generate_draft_decode_kv_indices(
    *,
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    seq_lens: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_indptr: torch.Tensor,
    topk: int,
    page_size: int = 1,
    provider: str = "triton",
) -> None:
    """Fill row `s` of `kv_indices` and of `kv_indptr` for every draft step `s`.

    `kv_indices` is `[num_steps, row_width]`; row `s` receives, for each request `b`
    and branch `k` (in that order), the request's `seq_lens[b]` prefix slots followed
    by its branch's `s + 1` draft slots. `kv_indptr` is `[num_steps, >= bs + 1]`
    (bs = num_seqs * topk): entry `z + 1` of row `s` is where segment `z` ends.

    Like sglang's kernel this does not check the row width: a row that is too narrow
    spills into the next row and, from the last row, past the end of the buffer. The
    torch provider has the same write semantics on a flat view of the buffer's storage
    and raises IndexError only where the real kernel would leave the allocation.
    """
    if provider not in PROVIDERS:
        raise KernelContractError(
            f"generate_draft_decode_kv_indices: provider {provider!r} is unknown: "
            f"expected one of {', '.join(PROVIDERS)}"
        )
    generate = _generate_torch if provider == "torch" else _generate_triton
    generate(
        _KVIndicesArgs(
            req_pool_indices=req_pool_indices,
            req_to_token=req_to_token,
            seq_lens=seq_lens,
            kv_indices=kv_indices,
            kv_indptr=kv_indptr,
            topk=topk,
            page_size=page_size,
        )
    )


def storage_tail_view(buffer: torch.Tensor, *, start: int = 0) -> torch.Tensor:
    """A 1-D view from element `start` of `buffer` to the end of its storage.

    This is what a kernel sees through a raw pointer: writes or reads past `buffer`'s
    own extent land in whatever the allocation holds next (a poisoning redzone).
    """
    element_offset = buffer.storage_offset() + start
    total = buffer.untyped_storage().nbytes() // buffer.element_size()
    return buffer.new_empty(0).set_(
        buffer.untyped_storage(), element_offset, (total - element_offset,), (1,)
    )


def draft_slot_start(
    *, seq_len: int, branch: int, num_steps: int, page_size: int, topk: int
) -> int:
    """Position in the request's `req_to_token` row of branch `branch`'s first draft slot."""
    if page_size == 1 or topk == 1:
        return seq_len + branch * num_steps
    last_page_len = seq_len % page_size
    pages_per_branch = (last_page_len + num_steps + page_size - 1) // page_size
    prefix_base = seq_len - last_page_len
    return prefix_base + branch * pages_per_branch * page_size + last_page_len


def _generate_torch(args: _KVIndicesArgs) -> None:
    kv_indices, kv_indptr, req_to_token = args.kv_indices, args.kv_indptr, args.req_to_token
    topk = args.topk
    num_steps, row_width = kv_indices.shape
    flat = storage_tail_view(kv_indices)
    lens = [int(v) for v in args.seq_lens.tolist()]
    rows = [int(v) for v in args.req_pool_indices.tolist()]
    for step in range(num_steps):
        offset = step * kv_indices.stride(0)
        indptr_row = kv_indptr[step]
        indptr_row[0] = 0
        for req, (seq_len, row) in enumerate(zip(lens, rows, strict=True)):
            for branch in range(topk):
                start = draft_slot_start(
                    seq_len=seq_len,
                    branch=branch,
                    num_steps=num_steps,
                    page_size=args.page_size,
                    topk=topk,
                )
                segment = torch.cat(
                    [req_to_token[row, :seq_len], req_to_token[row, start : start + step + 1]]
                )
                _write_flat(flat, offset, segment, row_width=row_width, step=step)
                offset += seq_len + step + 1
                indptr_row[req * topk + branch + 1] = offset - step * kv_indices.stride(0)


def _generate_triton(args: _KVIndicesArgs) -> None:
    kv_indices, kv_indptr, req_to_token = args.kv_indices, args.kv_indptr, args.req_to_token
    num_seqs, num_steps = int(args.seq_lens.shape[0]), int(kv_indices.shape[0])
    _draft_kv_indices_kernel[(num_steps, num_seqs, args.topk)](
        args.req_pool_indices,
        req_to_token,
        args.seq_lens,
        kv_indices,
        kv_indptr,
        req_to_token.stride(0),
        kv_indices.stride(0),
        kv_indptr.stride(0),
        PAGE_SIZE=args.page_size,
        SEQS_BLOCK=triton.next_power_of_2(max(num_seqs, 1)),
        STEPS_BLOCK=triton.next_power_of_2(num_steps),
        COPY_BLOCK=128,
    )


def _write_flat(
    flat: torch.Tensor, offset: int, values: torch.Tensor, *, row_width: int, step: int
) -> None:
    end = offset + values.numel()
    if end > flat.numel():
        raise IndexError(
            f"generate_draft_decode_kv_indices: step {step} writes kv_indices entries up to "
            f"flat offset {end}, but the allocation holds {flat.numel()} entries "
            f"(row width {row_width}); the real kernel would write unowned memory"
        )
    flat[offset:end] = values.to(flat.dtype)


@triton.jit
def _draft_kv_indices_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    req_pool_indices_ptr,
    req_to_token_ptr,
    seq_lens_ptr,
    kv_indices_ptr,
    kv_indptr_ptr,
    req_to_token_stride,
    kv_indices_stride,
    kv_indptr_stride,
    PAGE_SIZE: tl.constexpr,
    SEQS_BLOCK: tl.constexpr,
    STEPS_BLOCK: tl.constexpr,
    COPY_BLOCK: tl.constexpr,
):
    step = tl.program_id(0)
    req = tl.program_id(1)
    branch = tl.program_id(2)
    num_steps = tl.num_programs(0)
    topk = tl.num_programs(2)
    draft_len = step + 1

    seq_offsets = tl.arange(0, SEQS_BLOCK)
    earlier = tl.load(seq_lens_ptr + seq_offsets, mask=seq_offsets < req, other=0)
    prefix_before = tl.sum(earlier).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + req)

    # Segment of (req, branch) in row `step`; the row width is deliberately not checked.
    segment_start = prefix_before * topk + req * topk * draft_len + branch * (seq_len + draft_len)
    segment_start = segment_start.to(tl.int64)
    out_ptr = kv_indices_ptr + step.to(tl.int64) * kv_indices_stride + segment_start
    row = tl.load(req_pool_indices_ptr + req).to(tl.int64)
    token_row_ptr = req_to_token_ptr + row * req_to_token_stride

    copy_offsets = tl.arange(0, COPY_BLOCK)
    for block_start in range(0, seq_len, COPY_BLOCK):
        offs = block_start + copy_offsets
        slots = tl.load(token_row_ptr + offs, mask=offs < seq_len)
        tl.store(out_ptr + offs, slots, mask=offs < seq_len)

    draft_start = _draft_start(seq_len, branch, num_steps, topk, PAGE_SIZE)
    draft_offsets = tl.arange(0, STEPS_BLOCK)
    drafts = tl.load(token_row_ptr + draft_start + draft_offsets, mask=draft_offsets < draft_len)
    tl.store(out_ptr + seq_len + draft_offsets, drafts, mask=draft_offsets < draft_len)

    segment = req * topk + branch
    indptr_row_ptr = kv_indptr_ptr + step.to(tl.int64) * kv_indptr_stride
    segment_end = segment_start + seq_len + draft_len
    tl.store(indptr_row_ptr + segment + 1, segment_end.to(tl.int32))
    if segment == 0:
        tl.store(indptr_row_ptr, 0)


@triton.jit
def _draft_start(  # type: ignore[no-untyped-def]
    seq_len, branch, num_steps, topk, PAGE_SIZE: tl.constexpr
):
    """Triton twin of draft_slot_start(): where branch `branch`'s draft slots begin."""
    if PAGE_SIZE == 1 or topk == 1:
        start = seq_len + branch * num_steps
    else:
        last_page_len = seq_len % PAGE_SIZE
        pages_per_branch = (last_page_len + num_steps + PAGE_SIZE - 1) // PAGE_SIZE
        start = seq_len + branch * pages_per_branch * PAGE_SIZE
    return start

"""The Triton provider of the probes: one fused launch per probe, atomics into the witness row.

Each program reduces one block of the flat tensor; a block with hits adds its count
(atomic_add), lowers the lowest offending index and values (atomic_min / atomic_max), and
claims the first-hit `when` with a compare-and-swap on -1; the winner of that swap also
stores the bounds in force. Same row layout and results as torch_probes.py. Runs on CUDA,
and on CPU tensors under TRITON_INTERPRET=1 (set before triton is first imported).

Sizes and scalar bounds are not specialized on, nor are the alignments of the row, `when`
and bound pointers, so one compiled variant per dtype (and data alignment) serves every
call: run each probe once before CUDA graph capture (the warm-up runs do) so nothing is
compiled while capturing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import triton
import triton.language as tl

if TYPE_CHECKING:
    import torch

BLOCK_SIZE = 1024


def record_nan(row: torch.Tensor, when: torch.Tensor, flat: torch.Tensor) -> None:
    """Count the NaNs of the contiguous 1-D float tensor `flat` into `row`, one launch."""
    _launch_float_probe(row, when, flat, check_inf=False)


def record_inf(row: torch.Tensor, when: torch.Tensor, flat: torch.Tensor) -> None:
    """Count the infinities of `flat` into `row` (values: signs -1/+1), one launch."""
    _launch_float_probe(row, when, flat, check_inf=True)


def record_oob(
    row: torch.Tensor,
    when: torch.Tensor,
    flat: torch.Tensor,
    low: int | torch.Tensor,
    high: int | torch.Tensor,
) -> None:
    """Count the values of the contiguous 1-D integer `flat` outside [low, high), one launch.

    A tensor bound is a 1-element int tensor on `flat`'s device, read by the kernel.
    """
    n = flat.numel()
    low_is_ptr = not isinstance(low, int)
    high_is_ptr = not isinstance(high, int)
    _oob_probe_kernel[(triton.cdiv(n, BLOCK_SIZE),)](
        flat,
        n,
        low if low_is_ptr else when,
        high if high_is_ptr else when,
        0 if low_is_ptr else low,
        0 if high_is_ptr else high,
        row,
        when,
        LOW_IS_PTR=low_is_ptr,
        HIGH_IS_PTR=high_is_ptr,
        BLOCK=BLOCK_SIZE,
    )


def _launch_float_probe(
    row: torch.Tensor, when: torch.Tensor, flat: torch.Tensor, *, check_inf: bool
) -> None:
    """Launch the NaN/Inf kernel over `flat` (16-bit floats are compared as fp32)."""
    n = flat.numel()
    _float_probe_kernel[(triton.cdiv(n, BLOCK_SIZE),)](
        flat,
        n,
        row,
        when,
        CHECK_INF=check_inf,
        UPCAST=flat.element_size() < 4,
        BLOCK=BLOCK_SIZE,
    )


@triton.jit
def _claim_first_hit(row_ptr, when_ptr):  # type: ignore[no-untyped-def]
    """Swap the row's first-hit `when` from -1 to now; return whether this block won."""
    when = tl.load(when_ptr)
    unhit = tl.full((), -1, tl.int64)
    previous = tl.atomic_cas(row_ptr + 2, unhit, when)
    return previous == unhit


@triton.jit(do_not_specialize=["n"], do_not_specialize_on_alignment=["row_ptr", "when_ptr"])
def _float_probe_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    x_ptr,
    n,
    row_ptr,
    when_ptr,
    CHECK_INF: tl.constexpr,
    UPCAST: tl.constexpr,
    BLOCK: tl.constexpr,
):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_range = offsets < n
    x = tl.load(x_ptr + offsets, mask=in_range, other=0.0)
    if UPCAST:
        x = x.to(tl.float32)
    if CHECK_INF:
        bad = ((x == float("inf")) | (x == float("-inf"))) & in_range
    else:
        bad = (x != x) & in_range  # noqa: PLR0124 (NaN is the one value unequal to itself)
    # Reductions stay outside the branch: only the scalar atomics are conditional.
    count = tl.sum(bad.to(tl.int64), axis=0)
    lowest = tl.min(tl.where(bad, offsets, 9223372036854775807), axis=0)
    if CHECK_INF:
        signs = tl.where(x > 0, 1, -1).to(tl.int64)
        lowest_sign = tl.min(tl.where(bad, signs, 1), axis=0)
        highest_sign = tl.max(tl.where(bad, signs, -1), axis=0)
    if count > 0:
        tl.atomic_add(row_ptr + 0, count)
        tl.atomic_min(row_ptr + 1, lowest)
        if CHECK_INF:
            tl.atomic_min(row_ptr + 3, lowest_sign)
            tl.atomic_max(row_ptr + 4, highest_sign)
        _claim_first_hit(row_ptr, when_ptr)


@triton.jit(
    do_not_specialize=["n", "low_value", "high_value"],
    do_not_specialize_on_alignment=["low_ptr", "high_ptr", "row_ptr", "when_ptr"],
)
def _oob_probe_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    x_ptr,
    n,
    low_ptr,
    high_ptr,
    low_value,
    high_value,
    row_ptr,
    when_ptr,
    LOW_IS_PTR: tl.constexpr,
    HIGH_IS_PTR: tl.constexpr,
    BLOCK: tl.constexpr,
):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_range = offsets < n
    values = tl.load(x_ptr + offsets, mask=in_range, other=0).to(tl.int64)
    if LOW_IS_PTR:  # noqa: SIM108 (constexpr branch: the untaken load is not compiled)
        low = tl.load(low_ptr).to(tl.int64)
    else:
        low = low_value.to(tl.int64)
    if HIGH_IS_PTR:  # noqa: SIM108
        high = tl.load(high_ptr).to(tl.int64)
    else:
        high = high_value.to(tl.int64)
    bad = ((values < low) | (values >= high)) & in_range
    count = tl.sum(bad.to(tl.int64), axis=0)
    lowest = tl.min(tl.where(bad, offsets, 9223372036854775807), axis=0)
    lowest_value = tl.min(tl.where(bad, values, 9223372036854775807), axis=0)
    highest_value = tl.max(tl.where(bad, values, -9223372036854775807 - 1), axis=0)
    if count > 0:
        tl.atomic_add(row_ptr + 0, count)
        tl.atomic_min(row_ptr + 1, lowest)
        tl.atomic_min(row_ptr + 3, lowest_value)
        tl.atomic_max(row_ptr + 4, highest_value)
        won = _claim_first_hit(row_ptr, when_ptr)
        if won:
            tl.store(row_ptr + 5, low)
            tl.store(row_ptr + 6, high)

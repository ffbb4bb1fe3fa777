"""The Triton provider of the probes: one launch per probe (or per group of tensors).

A launch runs a fixed number of programs that stride over the blocks of each of its
tensors. The clean path, taken by every program that sees no offending element, is one
masked load per block (the first blocks of all tensors issued together), an OR into a flag
vector, one reduction and no atomics: a clean launch writes nothing. A program that saw a
hit rescans its blocks, folds them into each tensor's witness row with atomics (count,
lowest offending index, first and last row, value range), and then tries the launch's
claim lock (the leading row's slot of the table's `claim_locks`). The holder claims the
first hit of every row of the launch that is still unclaimed and has an offending element
anywhere in its tensor (it looks for itself, since other programs may still be folding), in
the launch's tensor order: it stamps the `when`, takes the next number of the device's
sequence counter and, for range probes, stores the bounds in force; then it releases the
lock. A program that finds the lock taken leaves: the holder sees its hits too, since the
data does not change during the launch. So first-hit order numbers follow execution order,
within a launch too, and replays of a CUDA graph keep counting. Same rows as
torch_provider.py. Runs on CUDA, and on CPU tensors under TRITON_INTERPRET=1 (set before
triton is first imported).

The witness layout reaches the kernels as constexprs named after witness.py's columns.
Sizes and scalar bounds are not specialized on, nor are the alignments of the table
pointers, so one compiled variant per dtype tuple (and data alignment) serves every call:
run each probe once before CUDA graph capture (the warm-up runs do) so nothing is compiled
while capturing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import triton
import triton.language as tl

from prtoggle.detect.probes import witness
from prtoggle.detect.probes.witness import DeviceTable, ProbeItem

if TYPE_CHECKING:
    import torch


BLOCK_SIZE = 1024
PROGRAMS_PER_SM = 4
NUM_WARPS = 4
_CPU_PROGRAMS = 4

COUNT: tl.constexpr = tl.constexpr(witness.COL_COUNT)
LOWEST_INDEX: tl.constexpr = tl.constexpr(witness.COL_LOWEST_INDEX)
FIRST_WHEN: tl.constexpr = tl.constexpr(witness.COL_FIRST_WHEN)
MIN_VALUE: tl.constexpr = tl.constexpr(witness.COL_MIN_VALUE)
MAX_VALUE: tl.constexpr = tl.constexpr(witness.COL_MAX_VALUE)
FIRST_LOW: tl.constexpr = tl.constexpr(witness.COL_FIRST_LOW)
FIRST_HIGH: tl.constexpr = tl.constexpr(witness.COL_FIRST_HIGH)
FIRST_ORDER: tl.constexpr = tl.constexpr(witness.COL_FIRST_ORDER)
FIRST_ROW: tl.constexpr = tl.constexpr(witness.COL_FIRST_ROW)
LAST_ROW: tl.constexpr = tl.constexpr(witness.COL_LAST_ROW)
NUM_COLUMNS: tl.constexpr = tl.constexpr(witness.NUM_COLUMNS)
UNHIT_WHEN: tl.constexpr = tl.constexpr(witness.UNHIT_WHEN)
INT64_MAX: tl.constexpr = tl.constexpr(witness.INT64_MAX)
INT64_MIN: tl.constexpr = tl.constexpr(witness.INT64_MIN)

_SM_COUNTS: dict[int, int] = {}


def record_float(table: DeviceTable, items: Sequence[ProbeItem], *, check_inf: bool) -> None:
    """Count the NaNs (or infinities: values hold the signs -1/+1) of every item, one launch."""
    _float_probe_kernel[(_programs(items),)](
        tuple(item.flat for item in items),
        tuple(item.flat.numel() for item in items),
        tuple(max(item.row_width, 1) for item in items),
        tuple(item.slot for item in items),
        table.rows,
        table.when,
        table.sequence,
        table.claim_locks[items[0].slot :],
        COUNT_TENSORS=len(items),
        CHECK_INF=check_inf,
        BLOCK=BLOCK_SIZE,
        num_warps=NUM_WARPS,
    )


def record_oob(
    table: DeviceTable, item: ProbeItem, low: int | torch.Tensor, high: int | torch.Tensor
) -> None:
    """Count the values of the item's integer tensor outside [low, high), one launch.

    A tensor bound is a 1-element int tensor on the item's device, read by the kernel.
    """
    low_is_ptr = not isinstance(low, int)
    high_is_ptr = not isinstance(high, int)
    _oob_probe_kernel[(_programs([item]),)](
        item.flat,
        item.flat.numel(),
        max(item.row_width, 1),
        low if low_is_ptr else table.when,
        high if high_is_ptr else table.when,
        0 if low_is_ptr else low,
        0 if high_is_ptr else high,
        table.rows[item.slot :],
        table.when,
        table.sequence,
        table.claim_locks[item.slot :],
        LOW_IS_PTR=low_is_ptr,
        HIGH_IS_PTR=high_is_ptr,
        BLOCK=BLOCK_SIZE,
        num_warps=NUM_WARPS,
    )


def _programs(items: Sequence[ProbeItem]) -> int:
    """How many programs stride over the items: their blocks, at most a few per SM."""
    blocks = max(triton.cdiv(item.flat.numel(), BLOCK_SIZE) for item in items)
    device = items[0].flat.device
    if device.type != "cuda":
        return max(1, min(blocks, _CPU_PROGRAMS))
    index = device.index if device.index is not None else 0
    if index not in _SM_COUNTS:
        import torch

        _SM_COUNTS[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return max(1, min(blocks, PROGRAMS_PER_SM * _SM_COUNTS[index]))


@triton.jit(
    do_not_specialize=["ns", "widths", "slots"],
    do_not_specialize_on_alignment=["rows_ptr", "when_ptr", "sequence_ptr", "lock_ptr"],
)
def _float_probe_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    xs,
    ns,
    widths,
    slots,
    rows_ptr,
    when_ptr,
    sequence_ptr,
    lock_ptr,
    COUNT_TENSORS: tl.constexpr,
    CHECK_INF: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # The first blocks of all tensors: straight-line code, their loads in flight together.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # int32: the grid is small
    flags = tl.zeros([BLOCK], dtype=tl.int1)
    for k in tl.static_range(COUNT_TENSORS):
        x = tl.load(xs[k] + offsets, mask=offsets < ns[k], other=0.0)
        flags |= _float_bad(x, CHECK_INF)
    for k in tl.static_range(COUNT_TENSORS):  # tensors of more than a block per program
        flags = _float_flags_after_first(xs[k], ns[k], flags, CHECK_INF, BLOCK)
    if tl.max(flags.to(tl.int32), axis=0) > 0:  # this program saw a hit (rare)
        for k in tl.static_range(COUNT_TENSORS):
            row_ptr = rows_ptr + slots[k] * NUM_COLUMNS
            _fold_float_hits(xs[k], ns[k], widths[k], row_ptr, CHECK_INF, BLOCK)
        if _take_claim_lock(lock_ptr):
            when = tl.load(when_ptr)
            for k in tl.static_range(COUNT_TENSORS):
                row_ptr = rows_ptr + slots[k] * NUM_COLUMNS
                if _unclaimed(row_ptr):  # noqa: SIM102 (the scan runs only for unclaimed rows)
                    if _float_tensor_hit(xs[k], ns[k], CHECK_INF, BLOCK):
                        _stamp_first_hit(row_ptr, when, sequence_ptr)
            tl.atomic_xchg(lock_ptr, 0)


@triton.jit(
    do_not_specialize=["n", "width", "low_value", "high_value"],
    do_not_specialize_on_alignment=[
        "low_ptr",
        "high_ptr",
        "row_ptr",
        "when_ptr",
        "sequence_ptr",
        "lock_ptr",
    ],
)
def _oob_probe_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    x_ptr,
    n,
    width,
    low_ptr,
    high_ptr,
    low_value,
    high_value,
    row_ptr,
    when_ptr,
    sequence_ptr,
    lock_ptr,
    LOW_IS_PTR: tl.constexpr,
    HIGH_IS_PTR: tl.constexpr,
    BLOCK: tl.constexpr,
):
    if LOW_IS_PTR:  # noqa: SIM108 (constexpr branch: the untaken load is not compiled)
        low = tl.load(low_ptr).to(tl.int64)
    else:
        low = low_value.to(tl.int64)
    if HIGH_IS_PTR:  # noqa: SIM108
        high = tl.load(high_ptr).to(tl.int64)
    else:
        high = high_value.to(tl.int64)
    flags = tl.zeros([BLOCK], dtype=tl.int1)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    for start in range(tl.program_id(0).to(tl.int64) * BLOCK, n, step):
        offsets = tl.arange(0, BLOCK).to(tl.int64) + start
        in_range = offsets < n
        values = tl.load(x_ptr + offsets, mask=in_range, other=0).to(tl.int64)
        flags |= ((values < low) | (values >= high)) & in_range
    if tl.max(flags.to(tl.int32), axis=0) > 0:  # this program saw a hit (rare)
        _fold_oob_hits(x_ptr, n, width, low, high, row_ptr, BLOCK)
        if _take_claim_lock(lock_ptr):
            if _unclaimed(row_ptr):  # noqa: SIM102 (the scan runs only for unclaimed rows)
                if _oob_tensor_hit(x_ptr, n, low, high, BLOCK):
                    _stamp_first_hit(row_ptr, tl.load(when_ptr), sequence_ptr)
                    tl.atomic_xchg(row_ptr + FIRST_LOW, low)
                    tl.atomic_xchg(row_ptr + FIRST_HIGH, high)
            tl.atomic_xchg(lock_ptr, 0)


@triton.jit
def _float_bad(x, CHECK_INF: tl.constexpr):  # type: ignore[no-untyped-def]
    """Offending elements of a loaded float block: NaNs, or +/-inf with CHECK_INF."""
    if x.dtype.primitive_bitwidth < 32:
        x = x.to(tl.float32)
    if CHECK_INF:
        return (x == float("inf")) | (x == float("-inf"))
    return x != x  # noqa: PLR0124 (NaN is the one value unequal to itself)


@triton.jit
def _float_flags_after_first(x_ptr, n, flags, CHECK_INF: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    """OR this program's offending elements past its first block of one float tensor into
    `flags` (no reduction; no iteration when the grid covers the tensor)."""
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    for start in range(tl.program_id(0).to(tl.int64) * BLOCK + step, n, step):
        offsets = tl.arange(0, BLOCK).to(tl.int64) + start
        flags |= _float_bad(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), CHECK_INF)
    return flags


@triton.jit
def _float_tensor_hit(x_ptr, n, CHECK_INF: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    """Whether any element of the whole tensor offends (one program; stops at a hit)."""
    found = tl.full((), 0, tl.int32)
    start = tl.full((), 0, tl.int64)
    while (start < n) & (found == 0):
        offsets = tl.arange(0, BLOCK).to(tl.int64) + start
        x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
        found = tl.max(_float_bad(x, CHECK_INF).to(tl.int32), axis=0)
        start += BLOCK
    return found > 0


@triton.jit
def _oob_tensor_hit(x_ptr, n, low, high, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    """Whether any value of the whole tensor is outside [low, high) (one program)."""
    found = tl.full((), 0, tl.int32)
    start = tl.full((), 0, tl.int64)
    while (start < n) & (found == 0):
        offsets = tl.arange(0, BLOCK).to(tl.int64) + start
        in_range = offsets < n
        values = tl.load(x_ptr + offsets, mask=in_range, other=0).to(tl.int64)
        found = tl.max((((values < low) | (values >= high)) & in_range).to(tl.int32), axis=0)
        start += BLOCK
    return found > 0


@triton.jit
def _fold_float_hits(x_ptr, n, width, row_ptr, CHECK_INF: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Rescan this program's blocks of one float tensor; fold its hits into the row."""
    count = tl.full((), 0, tl.int64)
    lowest = tl.full((), INT64_MAX, tl.int64)
    highest = tl.full((), -1, tl.int64)
    lowest_sign = tl.full((), 1, tl.int64)
    highest_sign = tl.full((), -1, tl.int64)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    for start in range(tl.program_id(0).to(tl.int64) * BLOCK, n, step):
        offsets = tl.arange(0, BLOCK).to(tl.int64) + start
        x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
        if x_ptr.dtype.element_ty.primitive_bitwidth < 32:
            x = x.to(tl.float32)  # float64 stays: a finite value past float32's range
        bad = _float_bad(x, CHECK_INF)
        if CHECK_INF:
            signs = tl.where(x > 0, 1, -1).to(tl.int64)
            lowest_sign = tl.minimum(lowest_sign, tl.min(tl.where(bad, signs, 1), axis=0))
            highest_sign = tl.maximum(highest_sign, tl.max(tl.where(bad, signs, -1), axis=0))
        count += tl.sum(bad.to(tl.int64), axis=0)
        lowest = tl.minimum(lowest, tl.min(tl.where(bad, offsets, INT64_MAX), axis=0))
        highest = tl.maximum(highest, tl.max(tl.where(bad, offsets, -1), axis=0))
    if count > 0:
        _fold_counts(row_ptr, count, lowest, highest, width)
        if CHECK_INF:
            tl.atomic_min(row_ptr + MIN_VALUE, lowest_sign)
            tl.atomic_max(row_ptr + MAX_VALUE, highest_sign)


@triton.jit
def _fold_oob_hits(x_ptr, n, width, low, high, row_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Rescan this program's blocks of an integer tensor; fold its out-of-range values."""
    count = tl.full((), 0, tl.int64)
    lowest = tl.full((), INT64_MAX, tl.int64)
    highest = tl.full((), -1, tl.int64)
    lowest_value = tl.full((), INT64_MAX, tl.int64)
    highest_value = tl.full((), INT64_MIN, tl.int64)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    for start in range(tl.program_id(0).to(tl.int64) * BLOCK, n, step):
        offsets = tl.arange(0, BLOCK).to(tl.int64) + start
        in_range = offsets < n
        values = tl.load(x_ptr + offsets, mask=in_range, other=0).to(tl.int64)
        bad = ((values < low) | (values >= high)) & in_range
        count += tl.sum(bad.to(tl.int64), axis=0)
        lowest = tl.minimum(lowest, tl.min(tl.where(bad, offsets, INT64_MAX), axis=0))
        highest = tl.maximum(highest, tl.max(tl.where(bad, offsets, -1), axis=0))
        lowest_value = tl.minimum(lowest_value, tl.min(tl.where(bad, values, INT64_MAX), axis=0))
        highest_value = tl.maximum(highest_value, tl.max(tl.where(bad, values, INT64_MIN), axis=0))
    if count > 0:
        _fold_counts(row_ptr, count, lowest, highest, width)
        tl.atomic_min(row_ptr + MIN_VALUE, lowest_value)
        tl.atomic_max(row_ptr + MAX_VALUE, highest_value)


@triton.jit
def _fold_counts(row_ptr, count, lowest, highest, width):  # type: ignore[no-untyped-def]
    """Add a program's hit count, lowest flat index and offending row range to the row."""
    tl.atomic_add(row_ptr + COUNT, count)
    tl.atomic_min(row_ptr + LOWEST_INDEX, lowest)
    tl.atomic_min(row_ptr + FIRST_ROW, lowest // width)
    tl.atomic_max(row_ptr + LAST_ROW, highest // width)


@triton.jit
def _take_claim_lock(lock_ptr):  # type: ignore[no-untyped-def]
    """True if this program took the launch's claim lock (0 free, 1 held; acq_rel)."""
    return tl.atomic_xchg(lock_ptr, 1) == 0


@triton.jit
def _unclaimed(row_ptr):  # type: ignore[no-untyped-def]
    """Whether the row's first hit has not been claimed yet (read through L2)."""
    return tl.atomic_add(row_ptr + FIRST_WHEN, 0) == UNHIT_WHEN


@triton.jit
def _stamp_first_hit(row_ptr, when, sequence_ptr):  # type: ignore[no-untyped-def]
    """Claim the row's first hit: stamp `when` and take the next first-hit order number."""
    tl.atomic_xchg(row_ptr + FIRST_WHEN, when)
    tl.atomic_xchg(row_ptr + FIRST_ORDER, tl.atomic_add(sequence_ptr, 1))

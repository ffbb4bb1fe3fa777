"""The torch-op provider of the probes: branch-free, no host sync, any device.

Each function updates one witness row exactly as the Triton kernels do (see witness.py
for the columns), using only device-side tensor ops, so it is capturable on CUDA and is
the reference the Triton kernels are tested against.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prtoggle.detect.witness import (
    COL_COUNT,
    COL_FIRST_HIGH,
    COL_FIRST_LOW,
    COL_FIRST_WHEN,
    COL_LOWEST_INDEX,
    COL_MAX_VALUE,
    COL_MIN_VALUE,
    INT64_MAX,
    INT64_MIN,
    NUM_COLUMNS,
    UNHIT_WHEN,
)

if TYPE_CHECKING:
    import torch


def record_nan(row: torch.Tensor, when: torch.Tensor, flat: torch.Tensor) -> None:
    """Count the NaNs of the 1-D float tensor `flat` into the witness `row`."""
    import torch

    _record(row, when, torch.isnan(flat), values=None, low=None, high=None)


def record_inf(row: torch.Tensor, when: torch.Tensor, flat: torch.Tensor) -> None:
    """Count the infinities of `flat` into `row`; values record the signs (-1, +1)."""
    import torch

    bad = torch.isinf(flat)
    signs = torch.where(flat > 0, 1, -1).to(torch.int64)
    _record(row, when, bad, values=signs, low=None, high=None)


def record_oob(
    row: torch.Tensor,
    when: torch.Tensor,
    flat: torch.Tensor,
    low: int | torch.Tensor,
    high: int | torch.Tensor,
) -> None:
    """Count the values of the 1-D integer tensor `flat` outside [low, high) into `row`."""
    import torch

    values = flat.to(torch.int64)
    bad = (values < low) | (values >= high)
    _record(row, when, bad, values=values, low=low, high=high)


def _record(
    row: torch.Tensor,
    when: torch.Tensor,
    bad: torch.Tensor,
    *,
    values: torch.Tensor | None,
    low: int | torch.Tensor | None,
    high: int | torch.Tensor | None,
) -> None:
    """Fold one probe's offending mask into the row with device-side ops only."""
    import torch

    positions = torch.arange(bad.numel(), dtype=torch.int64, device=bad.device)
    count = bad.sum(dtype=torch.int64)
    first = (count > 0) & (row[COL_FIRST_WHEN] == UNHIT_WHEN)
    columns = [row[i] for i in range(NUM_COLUMNS)]
    columns[COL_COUNT] = row[COL_COUNT] + count
    lowest = torch.where(bad, positions, INT64_MAX).min()
    columns[COL_LOWEST_INDEX] = torch.minimum(row[COL_LOWEST_INDEX], lowest)
    columns[COL_FIRST_WHEN] = torch.where(first, when[0], row[COL_FIRST_WHEN])
    if values is not None:
        columns[COL_MIN_VALUE] = torch.minimum(
            row[COL_MIN_VALUE], torch.where(bad, values, INT64_MAX).min()
        )
        columns[COL_MAX_VALUE] = torch.maximum(
            row[COL_MAX_VALUE], torch.where(bad, values, INT64_MIN).max()
        )
    if low is not None and high is not None:
        columns[COL_FIRST_LOW] = torch.where(first, low, row[COL_FIRST_LOW])
        columns[COL_FIRST_HIGH] = torch.where(first, high, row[COL_FIRST_HIGH])
    row.copy_(torch.stack(columns))

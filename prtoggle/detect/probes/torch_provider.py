"""The torch-op provider of the probes: branch-free, no host sync, any device.

Each function updates witness rows exactly as the Triton kernels do (see witness.py for the
columns): first every item's hits are folded into its row, then the newly hit rows claim
their first hit in item order (stamp `when`, take the next sequence number). Only
device-side tensor ops, so it is capturable on CUDA and is the reference the Triton kernels
are tested against. host_checks.py records host values through record_oob() too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from prtoggle.detect.probes.witness import (
    COL_COUNT,
    COL_FIRST_HIGH,
    COL_FIRST_LOW,
    COL_FIRST_ORDER,
    COL_FIRST_ROW,
    COL_FIRST_WHEN,
    COL_LAST_ROW,
    COL_LOWEST_INDEX,
    COL_MAX_VALUE,
    COL_MIN_VALUE,
    INT64_MAX,
    INT64_MIN,
    NUM_COLUMNS,
    UNHIT_WHEN,
    DeviceTable,
    ProbeItem,
)

if TYPE_CHECKING:
    import torch


def record_float(table: DeviceTable, items: Sequence[ProbeItem], *, check_inf: bool) -> None:
    """Count the NaNs (or infinities: values hold the signs -1/+1) of every item."""
    import torch

    for item in items:
        if check_inf:
            bad = torch.isinf(item.flat)
            signs = torch.where(item.flat > 0, 1, -1).to(torch.int64)
            _fold(table.rows[item.slot], item, bad, values=signs)
        else:
            _fold(table.rows[item.slot], item, torch.isnan(item.flat), values=None)
    for item in items:
        _claim_first_hit(table, item.slot, bounds=None)


def record_oob(
    table: DeviceTable, item: ProbeItem, low: int | torch.Tensor, high: int | torch.Tensor
) -> None:
    """Count the values of the item's integer tensor outside [low, high)."""
    import torch

    values = item.flat.to(torch.int64)
    bad = (values < low) | (values >= high)
    _fold(table.rows[item.slot], item, bad, values=values)
    _claim_first_hit(table, item.slot, bounds=(low, high))


def _fold(
    row: torch.Tensor, item: ProbeItem, bad: torch.Tensor, *, values: torch.Tensor | None
) -> None:
    """Fold one tensor's offending mask (and values) into `row` with device-side ops only."""
    import torch

    positions = torch.arange(bad.numel(), dtype=torch.int64, device=bad.device)
    columns = [row[i] for i in range(NUM_COLUMNS)]
    columns[COL_COUNT] = row[COL_COUNT] + bad.sum(dtype=torch.int64)
    lowest = torch.where(bad, positions, INT64_MAX).min()
    columns[COL_LOWEST_INDEX] = torch.minimum(row[COL_LOWEST_INDEX], lowest)
    if item.row_width > 0:
        highest = torch.where(bad, positions, -1).max()
        first_row = torch.where(lowest == INT64_MAX, INT64_MAX, lowest // item.row_width)
        last_row = torch.where(highest < 0, INT64_MIN, highest // item.row_width)
        columns[COL_FIRST_ROW] = torch.minimum(row[COL_FIRST_ROW], first_row)
        columns[COL_LAST_ROW] = torch.maximum(row[COL_LAST_ROW], last_row)
    if values is not None:
        columns[COL_MIN_VALUE] = torch.minimum(
            row[COL_MIN_VALUE], torch.where(bad, values, INT64_MAX).min()
        )
        columns[COL_MAX_VALUE] = torch.maximum(
            row[COL_MAX_VALUE], torch.where(bad, values, INT64_MIN).max()
        )
    row.copy_(torch.stack(columns))


def _claim_first_hit(
    table: DeviceTable,
    slot: int,
    *,
    bounds: tuple[int | torch.Tensor, int | torch.Tensor] | None,
) -> None:
    """A hit row not yet claimed takes `when`, the next order number and the bounds."""
    import torch

    row = table.rows[slot]
    first = (row[COL_COUNT] > 0) & (row[COL_FIRST_WHEN] == UNHIT_WHEN)
    updates: dict[int, int | torch.Tensor] = {
        COL_FIRST_WHEN: table.when[0],
        COL_FIRST_ORDER: table.sequence[0],
    }
    if bounds is not None:
        updates[COL_FIRST_LOW], updates[COL_FIRST_HIGH] = bounds
    columns = [row[i] for i in range(NUM_COLUMNS)]
    for column, value in updates.items():
        columns[column] = torch.where(first, value, row[column])
    row.copy_(torch.stack(columns))
    table.sequence.add_(first.to(torch.int64))

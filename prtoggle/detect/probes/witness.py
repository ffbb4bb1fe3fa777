"""Device-side witness table: one int64 row per (kind, site), stamped by probes without syncs.

Layout of a row (columns COL_*, NUM_COLUMNS of them, EMPTY_ROW before any hit): hit count,
lowest offending flat index, packed phase/step of the first hit (-1 until hit), lowest and
highest offending value (range probes: the index value; inf probes: -1 for -inf, +1 for
+inf), the bounds in force at the first hit, the first-hit order (the value of the device's
sequence counter when the site was first hit, -1 until hit), and the first and last
offending row along dim 0.

Each device has one fixed table: MAX_SITES rows, a `when` scalar (the packed current phase
and step, see clock.py), a `sequence` counter (bumped once per site's first hit, in
execution order, so graph replays keep counting) and one claim lock per row (the Triton
probes take the leading site's one to claim a launch's first hits; 0 between launches).
Allocated on first use, never reallocated: CUDA graphs captured against them stay valid. A
site keeps its row for the life of the process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prtoggle.errors import DetectUsageError

if TYPE_CHECKING:
    import torch

MAX_SITES = 1024
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
UNHIT_WHEN = -1
UNHIT_ORDER = -1
COL_COUNT = 0
COL_LOWEST_INDEX = 1
COL_FIRST_WHEN = 2
COL_MIN_VALUE = 3
COL_MAX_VALUE = 4
COL_FIRST_LOW = 5
COL_FIRST_HIGH = 6
COL_FIRST_ORDER = 7
COL_FIRST_ROW = 8
COL_LAST_ROW = 9
NUM_COLUMNS = 10
EMPTY_ROW = (
    0,  # COL_COUNT
    INT64_MAX,  # COL_LOWEST_INDEX
    UNHIT_WHEN,  # COL_FIRST_WHEN
    INT64_MAX,  # COL_MIN_VALUE
    INT64_MIN,  # COL_MAX_VALUE
    0,  # COL_FIRST_LOW
    0,  # COL_FIRST_HIGH
    UNHIT_ORDER,  # COL_FIRST_ORDER
    INT64_MAX,  # COL_FIRST_ROW
    INT64_MIN,  # COL_LAST_ROW
)
KINDS = ("nan", "inf", "oob")


@dataclass(frozen=True)
class ProbeItem:
    """One tensor of a probe launch: its flat view, its witness row, its elements per row
    along dim 0 (0: record no rows)."""

    flat: torch.Tensor
    slot: int
    row_width: int


@dataclass
class DeviceTable:
    """The witness rows and the current-`when` scalar of one device."""

    device: torch.device
    rows: torch.Tensor  # [max_sites, NUM_COLUMNS] int64
    when: torch.Tensor  # [1] int64, packed phase/step read by probes at run (or replay) time
    sequence: torch.Tensor  # [1] int64, the next first-hit order number
    claim_locks: torch.Tensor  # [max_sites] int64, a launch's first-hit claim lock (0: free)


@dataclass
class WitnessRegistry:
    """Site -> row assignment (shared by every device) and the per-device tables."""

    max_sites: int = MAX_SITES
    slots: dict[tuple[str, str], int] = field(default_factory=dict)
    tables: dict[str, DeviceTable] = field(default_factory=dict)
    stamp_pending: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def slot_for(self, kind: str, site: str) -> int:
        """The row of (kind, site), assigning the next free one on first sight."""
        key = (kind, site)
        slot = self.slots.get(key)
        if slot is not None:
            return slot
        _validate_site(kind, site)
        with self.lock:
            slot = self.slots.get(key)
            if slot is None:
                if len(self.slots) >= self.max_sites:
                    raise DetectUsageError(
                        f"witness table full: {self.max_sites} (kind, site) rows in use, "
                        f"cannot add {kind} probe site {site!r}; use fewer distinct site names "
                        f"(put varying values such as batch sizes in the message, not the name)"
                    )
                slot = len(self.slots)
                self.slots[key] = slot
        return slot

    def table_for(self, device: torch.device, *, when: int) -> DeviceTable:
        """The table of `device`, allocated (outside CUDA graph capture) on first use."""
        table = self.tables.get(str(device))
        if table is not None:
            return table
        device = _normalized(device)
        table = self.tables.get(str(device))
        if table is not None:
            return table
        if device.type == "cuda" and is_capturing():
            raise DetectUsageError(
                f"the witness table for {device} would be allocated during CUDA graph capture: "
                f"run one probe on {device} (or call prepare_device({str(device)!r})) before "
                f"capture, e.g. during the warm-up runs"
            )
        import torch

        with self.lock:
            table = self.tables.get(str(device))
            if table is None:
                rows = torch.tensor([EMPTY_ROW], dtype=torch.int64, device=device)
                rows = rows.repeat(self.max_sites, 1)
                stamp = torch.full((1,), when, dtype=torch.int64, device=device)
                table = DeviceTable(
                    device=device,
                    rows=rows,
                    when=stamp,
                    sequence=torch.zeros(1, dtype=torch.int64, device=device),
                    claim_locks=torch.zeros(self.max_sites, dtype=torch.int64, device=device),
                )
                self.tables[str(device)] = table
        return table

    def stamp(self, when: int) -> None:
        """Write the packed phase/step into every table (deferred while capturing)."""
        if not self.tables:
            self.stamp_pending = False
            return
        if is_capturing():
            self.stamp_pending = True
            return
        self.stamp_pending = False
        for table in self.tables.values():
            table.when.fill_(when)

    def clear(self) -> None:
        """Reset every row to its unhit state, the sequence to 0 and the claim locks to free
        (sites keep their rows)."""
        if not self.tables:
            return
        import torch

        if is_capturing():
            raise DetectUsageError("reset() called during CUDA graph capture: call it outside")
        for table in self.tables.values():
            empty = torch.tensor(EMPTY_ROW, dtype=torch.int64, device=table.device)
            table.rows.copy_(empty.expand_as(table.rows))
            table.sequence.zero_()
            table.claim_locks.zero_()  # free even after a launch that never finished

    def site_names(self) -> dict[int, tuple[str, str]]:
        """Row index -> (kind, site), a copy safe to use while probes add sites."""
        with self.lock:
            return {slot: key for key, slot in self.slots.items()}


def witness_tables() -> WitnessRegistry:
    """The process-wide witness registry (site rows and per-device tables) of the public API."""
    return _DEFAULT


def is_capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (False without CUDA)."""
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def _normalized(device: torch.device) -> torch.device:
    """`device` with its index filled in ("cuda" -> "cuda:<current>"), as tensors report it."""
    import torch

    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _validate_site(kind: str, site: str) -> None:
    """Reject unknown kinds and site names that are not non-empty strings."""
    if kind not in KINDS:
        raise DetectUsageError(f"unknown probe kind {kind!r}: expected one of {', '.join(KINDS)}")
    if not isinstance(site, str) or not site.strip():
        raise DetectUsageError(
            f"probe site must be a non-empty string naming where and when, "
            f"e.g. 'trtllm_mha.draft_decode[step=0].output'; got {site!r}"
        )


def reset_registry() -> None:
    """Drop every witness table and site row: the state of a fresh process."""
    vars(_DEFAULT).update(vars(WitnessRegistry()))  # in place: holders of it see the reset


_DEFAULT = WitnessRegistry()

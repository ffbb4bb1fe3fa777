"""Host-side range checks of Python ints (batch sizes, row widths, lengths) before a launch.

maybe_check_host_range() is gated by SGLANG_SPEC_OOB_DETECTION like the device range probe,
uses the same half-open convention and site naming, and records a hit into the CPU witness
table, so check() reports it with the device hits. In "raise" mode it also raises
OOBDetected at once, before the kernel that would fault is launched.
"""

from __future__ import annotations

from numbers import Integral

from prtoggle.detect import clock, config, witness
from prtoggle.detect.report import SiteHit, format_hits
from prtoggle.detect.witness import (
    COL_COUNT,
    COL_FIRST_HIGH,
    COL_FIRST_LOW,
    COL_FIRST_WHEN,
    COL_LOWEST_INDEX,
    COL_MAX_VALUE,
    COL_MIN_VALUE,
    UNHIT_WHEN,
)
from prtoggle.errors import DetectUsageError, OOBDetected

HOST_DEVICE = "cpu"


def maybe_check_host_range(value: int, low: int, high: int, site: str) -> None:
    """Check low <= value < high on the host (SGLANG_SPEC_OOB_DETECTION=1)."""
    if not config.oob_detection_enabled():
        return
    value, low, high = (_as_int(v, name, site) for v, name in _named(value, low, high))
    if low <= value < high:
        return
    hit = _record(value, low, high, site)
    if config.current_mode() == "raise":
        raise OOBDetected(format_hits([hit]), sites=(hit.site,))


def _record(value: int, low: int, high: int, site: str) -> SiteHit:
    """Fold one offending host value into the CPU witness row of `site`; the updated hit."""
    import torch

    registry = witness.default_registry()
    slot = registry.slot_for("oob", site)
    table = registry.table_for(torch.device(HOST_DEVICE), when=clock.current_when())
    row = table.rows[slot]
    current = row.tolist()
    first = current[COL_FIRST_WHEN] == UNHIT_WHEN
    current[COL_COUNT] += 1
    current[COL_LOWEST_INDEX] = min(current[COL_LOWEST_INDEX], 0)
    current[COL_MIN_VALUE] = min(current[COL_MIN_VALUE], value)
    current[COL_MAX_VALUE] = max(current[COL_MAX_VALUE], value)
    if first:
        current[COL_FIRST_WHEN] = clock.current_when()
        current[COL_FIRST_LOW], current[COL_FIRST_HIGH] = low, high
    row.copy_(torch.tensor(current, dtype=torch.int64))
    phase, step = clock.unpack_when(current[COL_FIRST_WHEN])
    return SiteHit(
        kind="oob",
        site=site,
        device=HOST_DEVICE,
        count=current[COL_COUNT],
        lowest_index=0,
        phase=phase,
        step=step,
        min_value=current[COL_MIN_VALUE],
        max_value=current[COL_MAX_VALUE],
        low=current[COL_FIRST_LOW],
        high=current[COL_FIRST_HIGH],
    )


def _named(value: object, low: object, high: object) -> list[tuple[object, str]]:
    """Pair each argument with its name for error messages."""
    return [(value, "value"), (low, "low"), (high, "high")]


def _as_int(value: object, name: str, site: str) -> int:
    """`value` as an int; Python and numpy integers only (a tensor would force a sync)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise DetectUsageError(
            f"maybe_check_host_range({site!r}): {name} must be a Python int, got "
            f"{type(value).__name__}; use maybe_detect_oob() for tensors"
        )
    return int(value)

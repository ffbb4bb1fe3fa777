"""Host-side range checks of Python ints (batch sizes, row widths, lengths) before a launch.

maybe_check_host_range() is gated by SGLANG_SPEC_OOB_DETECTION like the device range probe,
uses the same half-open convention and site naming, and records a hit into the CPU witness
table, so check() reports it with the device hits. In "raise" mode it also raises
OOBDetected at once, before the kernel that would fault is launched.
"""

from __future__ import annotations

from numbers import Integral

from prtoggle.detect import config
from prtoggle.detect.findings.hits import SiteHit, format_hits, site_hit_from_row
from prtoggle.detect.probes import clock, torch_provider, witness
from prtoggle.detect.probes.witness import ProbeItem
from prtoggle.errors import DetectUsageError, OOBDetected

HOST_DEVICE = "cpu"


def maybe_check_host_range(value: int, low: int, high: int, site: str) -> None:
    """Check low <= value < high on the host (SGLANG_SPEC_OOB_DETECTION=1 or an alias)."""
    if not config.oob_detection_enabled() or not config.hand_probes_enabled():
        return
    value, low, high = (_as_int(v, name, site) for v, name in _named(value, low, high))
    if low <= value < high:
        return
    hit = _record(value, low, high, site)
    if config.current_mode() == "raise":
        raise OOBDetected(format_hits([hit]), sites=(hit.site,), hits=(hit,))


def _record(value: int, low: int, high: int, site: str) -> SiteHit:
    """Fold one offending host value into the CPU witness row of `site` with the torch
    provider (a one-element probe without rows); the updated hit."""
    import torch

    registry = witness.witness_tables()
    slot = registry.slot_for("oob", site)
    table = registry.table_for(torch.device(HOST_DEVICE), when=clock.current_when())
    clock.sync_device_clock()
    item = ProbeItem(flat=torch.tensor([value], dtype=torch.int64), slot=slot, row_width=0)
    torch_provider.record_oob(table, item, low, high)
    return site_hit_from_row("oob", site, HOST_DEVICE, table.rows[slot].tolist())


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

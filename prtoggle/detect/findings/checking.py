"""check(), report() and reset(): read every witness table and redzone, then raise, warn or keep.

Each device is read with exactly one device-to-host copy (its witness rows and its redzone
comparison results concatenated on device first). The copy is ordered after the work
queued on the current stream: probes launched on another stream must be joined to it (or
synchronized) first. Hits are sticky: check() reports them again, with growing counts,
until reset().
"""

from __future__ import annotations

import logging

from prtoggle.detect import config
from prtoggle.detect.findings.hits import DetectionReport, Hit, make_report, site_hit_from_row
from prtoggle.detect.probes import clock, witness
from prtoggle.detect.redzones import buffers
from prtoggle.errors import DetectUsageError

logger = logging.getLogger(__name__)


def check() -> None:
    """Read all tables; on a hit raise (mode "raise"), log a warning ("warn") or keep it for
    report() ("record"). The process and CUDA context stay usable either way."""
    mode = config.current_mode()
    found = report()
    error = found.error()
    if error is None:
        return
    if mode == "raise":
        raise error
    if mode == "warn":
        logger.warning("%s: %s", type(error).__name__, error)
    else:
        logger.debug("recorded %s: %s", type(error).__name__, error)


def report() -> DetectionReport:
    """Everything hit since the last reset(), most severe first, without raising."""
    registry = witness.witness_tables()
    devices = list(registry.tables) + sorted(buffers.redzone_devices() - set(registry.tables))
    if not devices:
        return make_report([])
    if witness.is_capturing():
        raise DetectUsageError(
            "check()/report() called during CUDA graph capture: call it after capture or replay"
        )
    clock.sync_device_clock()
    names = registry.site_names()
    hits: list[Hit] = []
    for device in devices:
        hits.extend(_read_device(registry, device, names))
    return make_report(hits)


def reset() -> None:
    """Clear every witness row and re-arm every redzone (site rows stay assigned)."""
    witness.witness_tables().clear()
    buffers.rearm_redzones()


def reset_process_state() -> None:
    """Witness tables, redzones, phase/step and set_mode() as a fresh process has them.

    For a process that runs one program after another (the warm worker's forks); reset()
    only clears hits and keeps the tables and buffers.
    """
    witness.reset_registry()
    buffers.reset_registry()
    clock.reset_clock()
    config.set_mode(None)


def _read_device(
    registry: witness.WitnessRegistry, device: str, names: dict[int, tuple[str, str]]
) -> list[Hit]:
    """The hits of one device, read with one device-to-host copy."""
    import torch

    table = registry.tables.get(device)
    entries, redzone_rows = buffers.redzone_probe(torch.device(device))
    parts = [] if table is None else [table.rows.reshape(-1)]
    if redzone_rows is not None:
        parts.append(redzone_rows.reshape(-1))
    if not parts:  # no table, and every redzone intact (skipped on CPU)
        return []
    host = (parts[0] if len(parts) == 1 else torch.cat(parts)).cpu().tolist()
    hits: list[Hit] = []
    table_values = 0
    if table is not None:
        table_values = table.rows.numel()
        hits.extend(_site_hits(host[:table_values], device, names))
    redzone_values = host[table_values:]
    pairs = [redzone_values[i : i + 2] for i in range(0, len(redzone_values), 2)]
    hits.extend(buffers.redzone_hits(entries, pairs))
    return hits


def _site_hits(values: list[int], device: str, names: dict[int, tuple[str, str]]) -> list[Hit]:
    """SiteHit records of the rows (flattened in `values`) that count at least one hit."""
    hits: list[Hit] = []
    width = witness.NUM_COLUMNS
    for slot in sorted(names):
        row = values[slot * width : (slot + 1) * width]
        if row and row[witness.COL_COUNT] > 0:
            kind, site = names[slot]
            hits.append(site_hit_from_row(kind, site, device, row))
    return hits

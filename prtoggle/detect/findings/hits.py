"""Hit records read from the witness tables and redzones, their order and their message.

Hits are ordered by first hit (the device's sequence number taken when a site was first
hit, so the first item is the first writer), then redzones (found by check(), no order).
Message format (one line, items joined by "; "):

    2 sites hit, in first-hit order: nan at model.layers.2.mlp: 4 elements in row 1, first
    hit in phase eager at step 0, lowest flat index 9; nan at model.layers.2: 4 elements in
    rows 1..3, first hit in phase eager at step 0, lowest flat index 9

Per kind: `nan at SITE: N elements in rows A..B, first hit in phase P at step S, lowest flat
index I` (`in row A` when A == B; no rows for host checks); inf adds the signs seen,
`(+inf and -inf)`; oob adds the lowest and highest offending values and the bounds in force
at the first hit, `values LO..HI outside [L, H)` (`value V` when LO == HI); a redzone reads
`redzone of buffer NAME: B bytes overwritten, first at byte O past its end (N-byte buffer
on DEVICE)`; a redzone read (detect.check_read, raised at the read, never by check())
`redzone of buffer NAME: B bytes read by READER, first at byte O past its end (...)`.
When hits come from more than one device, each item names its device after the
site, `nan at SITE [cuda:1]: ...`; order numbers count per device.

Severity, most severe first: RedzoneViolation (memory already corrupted), RedzoneRead,
OOBDetected (an index that faults or corrupts), NaNDetected, InfDetected; check() raises
the class of the most severe hit, with `.first` (the first writer), `.hits` and `.sites` in
report order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prtoggle.detect.probes import clock, witness
from prtoggle.errors import (
    Finding,
    InfDetected,
    NaNDetected,
    OOBDetected,
    RedzoneRead,
    RedzoneViolation,
)

SEVERITY = ("redzone", "redzone-read", "oob", "nan", "inf")
ERROR_TYPES: dict[str, type[Finding]] = {
    "redzone": RedzoneViolation,
    "redzone-read": RedzoneRead,
    "oob": OOBDetected,
    "nan": NaNDetected,
    "inf": InfDetected,
}


@dataclass(frozen=True)
class SiteHit:
    """One probed site with at least one offending element."""

    kind: str  # "nan" | "inf" | "oob"
    site: str
    device: str
    count: int
    lowest_index: int
    phase: str
    step: int
    min_value: int = 0  # oob: lowest offending value; inf: -1 if a -inf was seen
    max_value: int = 0  # oob: highest offending value; inf: +1 if a +inf was seen
    low: int = 0  # oob: bounds in force at the first hit
    high: int = 0
    order: int = -1  # the device's first-hit sequence number (-1: unknown)
    first_row: int | None = None  # first and last offending row along dim 0 (None: no rows)
    last_row: int | None = None


@dataclass(frozen=True)
class RedzoneHit:
    """One poisoned buffer whose redzone bytes no longer match the canary."""

    name: str
    device: str
    buffer_bytes: int
    redzone_bytes: int
    first_offset: int
    changed_bytes: int
    kind: str = "redzone"

    @property
    def site(self) -> str:
        """The buffer's name stands for the site in reports."""
        return self.name


@dataclass(frozen=True)
class RedzoneReadHit:
    """A read reaching into the redzone of a guarded buffer (detect.check_read)."""

    name: str
    device: str
    buffer_bytes: int
    redzone_bytes: int
    first_offset: int
    read_bytes: int
    reader: str
    kind: str = "redzone-read"

    @property
    def site(self) -> str:
        """The buffer's name stands for the site in reports."""
        return self.name


Hit = SiteHit | RedzoneHit | RedzoneReadHit


@dataclass(frozen=True)
class DetectionReport:
    """Everything check() found, most severe first."""

    hits: tuple[Hit, ...]

    @property
    def clean(self) -> bool:
        """Whether nothing was hit."""
        return not self.hits

    def message(self) -> str:
        """The one-line description of every hit ("" when clean)."""
        return format_hits(self.hits)

    @property
    def first(self) -> Hit | None:
        """The first writer: the hit first in execution order (None when clean)."""
        return self.hits[0] if self.hits else None

    def error(self) -> Finding | None:
        """The exception of the most severe kind hit, naming every hit (None when clean)."""
        if not self.hits:
            return None
        kind = min((hit.kind for hit in self.hits), key=SEVERITY.index)
        sites = tuple(hit.site for hit in self.hits)
        return ERROR_TYPES[kind](self.message(), sites=sites, hits=self.hits)


def make_report(hits: list[Hit]) -> DetectionReport:
    """Order `hits` by first hit (per-device sequence), unordered ones (redzones) last."""
    ordered = sorted(hits, key=_first_hit_key)
    return DetectionReport(hits=tuple(ordered))


def site_hit_from_row(kind: str, site: str, device: str, row: Sequence[int]) -> SiteHit:
    """The SiteHit of one witness row (a hit row: count > 0), as read back to the host."""
    phase, step = clock.unpack_when(row[witness.COL_FIRST_WHEN])
    has_rows = row[witness.COL_FIRST_ROW] != witness.INT64_MAX
    return SiteHit(
        kind=kind,
        site=site,
        device=device,
        count=row[witness.COL_COUNT],
        lowest_index=row[witness.COL_LOWEST_INDEX],
        phase=phase,
        step=step,
        min_value=row[witness.COL_MIN_VALUE],
        max_value=row[witness.COL_MAX_VALUE],
        low=row[witness.COL_FIRST_LOW],
        high=row[witness.COL_FIRST_HIGH],
        order=row[witness.COL_FIRST_ORDER],
        first_row=row[witness.COL_FIRST_ROW] if has_rows else None,
        last_row=row[witness.COL_LAST_ROW] if has_rows else None,
    )


def format_hits(hits: tuple[Hit, ...] | list[Hit]) -> str:
    """The message for `hits`, in the order given."""
    if not hits:
        return ""
    with_device = len({hit.device for hit in hits}) > 1
    items = [_format_hit(hit, with_device=with_device) for hit in hits]
    if len(hits) == 1:
        return "1 site hit: " + items[0]
    return f"{len(hits)} sites hit, in first-hit order: " + "; ".join(items)


def _first_hit_key(hit: Hit) -> tuple[int, int, str]:
    """Sort key: sequenced hits by order number, then the rest (redzones) in given order."""
    if isinstance(hit, SiteHit) and hit.order >= 0:
        return (0, hit.order, hit.device)
    return (1, 0, "")


def _format_hit(hit: Hit, *, with_device: bool) -> str:
    """One item of the message."""
    device = f" [{hit.device}]" if with_device else ""
    if isinstance(hit, RedzoneReadHit):
        return (
            f"redzone of buffer {hit.name}{device}: {_plural(hit.read_bytes, 'byte')} read by "
            f"{hit.reader}, first at byte {hit.first_offset} past its end "
            f"({hit.buffer_bytes}-byte buffer on {hit.device})"
        )
    if isinstance(hit, RedzoneHit):
        return (
            f"redzone of buffer {hit.name}{device}: {_plural(hit.changed_bytes, 'byte')} "
            f"overwritten, first at byte {hit.first_offset} past its end "
            f"({hit.buffer_bytes}-byte buffer on {hit.device})"
        )
    detail = _plural(hit.count, "element") + _rows(hit)
    if hit.kind == "inf":
        detail += f" ({_inf_signs(hit)})"
    elif hit.kind == "oob":
        values = (
            f"value {hit.min_value}"
            if hit.min_value == hit.max_value
            else f"values {hit.min_value}..{hit.max_value}"
        )
        detail += f", {values} outside [{hit.low}, {hit.high})"
    return (
        f"{hit.kind} at {hit.site}{device}: {detail}, first hit in phase {hit.phase} "
        f"at step {hit.step}, lowest flat index {hit.lowest_index}"
    )


def _rows(hit: SiteHit) -> str:
    """ " in row R" / " in rows A..B", or "" when the probe recorded no rows."""
    if hit.first_row is None or hit.last_row is None:
        return ""
    if hit.first_row == hit.last_row:
        return f" in row {hit.first_row}"
    return f" in rows {hit.first_row}..{hit.last_row}"


def _inf_signs(hit: SiteHit) -> str:
    """ "+inf", "-inf" or "+inf and -inf" from the recorded sign range."""
    signs = []
    if hit.max_value > 0:
        signs.append("+inf")
    if hit.min_value < 0:
        signs.append("-inf")
    return " and ".join(signs)


def _plural(count: int, noun: str) -> str:
    """`1 byte`, `2 bytes`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"

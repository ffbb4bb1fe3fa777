"""Hit records read from the witness tables and redzones, their severity and their message.

Message format (one line, items joined by "; ", most severe first, then first-seen order):

    2 sites hit: oob at kv.indices: 2 elements, values 7..9 outside [0, 5), first hit in
    phase eager at step 0, lowest flat index 3; nan at attn.out: 4096 elements, first hit
    in phase capture-warmup at step 0, lowest flat index 0

Per kind: `nan at SITE: N elements, first hit in phase P at step S, lowest flat index I`;
inf adds the signs seen, `N elements (+inf and -inf)`; oob adds the lowest and highest
offending values and the bounds in force at the first hit, `values LO..HI outside [L, H)`
(`value V` when LO == HI); a redzone reads `redzone of buffer NAME: B bytes overwritten,
first at byte O past its end (N-byte buffer on DEVICE)`. When hits come from more than one
device, each item names its device after the site, `nan at SITE [cuda:1]: ...`.

Severity, most severe first: RedzoneViolation (memory already corrupted), OOBDetected (an
index that faults or corrupts), NaNDetected, InfDetected; check() raises the class of the
most severe hit, with every hit in the message.
"""

from __future__ import annotations

from dataclasses import dataclass

from prtoggle.errors import (
    DetectionError,
    InfDetected,
    NaNDetected,
    OOBDetected,
    RedzoneViolation,
)

SEVERITY = ("redzone", "oob", "nan", "inf")
ERROR_TYPES: dict[str, type[DetectionError]] = {
    "redzone": RedzoneViolation,
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


Hit = SiteHit | RedzoneHit


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

    def error(self) -> DetectionError | None:
        """The exception for the most severe hit, naming all of them (None when clean)."""
        if not self.hits:
            return None
        sites = tuple(hit.site for hit in self.hits)
        return ERROR_TYPES[self.hits[0].kind](self.message(), sites=sites)


def make_report(hits: list[Hit]) -> DetectionReport:
    """Order `hits` by severity (stable: first-seen order within a kind)."""
    ordered = sorted(hits, key=lambda hit: SEVERITY.index(hit.kind))
    return DetectionReport(hits=tuple(ordered))


def format_hits(hits: tuple[Hit, ...] | list[Hit]) -> str:
    """The message for `hits`, in the order given."""
    if not hits:
        return ""
    with_device = len({hit.device for hit in hits}) > 1
    items = [_format_hit(hit, with_device=with_device) for hit in hits]
    noun = "site" if len(hits) == 1 else "sites"
    return f"{len(hits)} {noun} hit: " + "; ".join(items)


def _format_hit(hit: Hit, *, with_device: bool) -> str:
    """One item of the message."""
    device = f" [{hit.device}]" if with_device else ""
    if isinstance(hit, RedzoneHit):
        return (
            f"redzone of buffer {hit.name}{device}: {_plural(hit.changed_bytes, 'byte')} "
            f"overwritten, first at byte {hit.first_offset} past its end "
            f"({hit.buffer_bytes}-byte buffer on {hit.device})"
        )
    detail = _plural(hit.count, "element")
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

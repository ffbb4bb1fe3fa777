"""Poisoned pre-allocated buffers (SGLANG_DEBUG_POISON=1) and their byte-wise redzones.

Poisoned, a buffer starts as NaN (floats) or an out-of-range sentinel (-1 for signed ints,
the maximum for unsigned ones), and is a view of the first bytes of a larger uint8 allocation
whose tail, the redzone, holds a canary byte pattern. check() compares each live redzone
with its canary byte by byte (integer compares on uint8, never float equality); reset()
re-arms them. Allocate before CUDA graph capture; using the buffer inside capture is fine.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prtoggle.detect import config
from prtoggle.detect.report import RedzoneHit
from prtoggle.errors import DetectUsageError

if TYPE_CHECKING:
    import torch

DEFAULT_REDZONE_BYTES = 4096
_CANARY_MULTIPLIER = 151
_CANARY_OFFSET = 0x3D


@dataclass
class GuardedBuffer:
    """A poisoned buffer (weakly held: checked while the returned tensor lives), its size in
    bytes and its redzone canary."""

    name: str
    buffer: weakref.ref[torch.Tensor]
    buffer_bytes: int
    canary: torch.Tensor  # uint8 [redzone_bytes], same device

    def redzone(self) -> torch.Tensor | None:
        """The redzone bytes after the buffer, or None once the buffer has been freed."""
        import torch

        buffer = self.buffer()
        if buffer is None:
            return None
        zone = torch.empty(0, dtype=torch.uint8, device=buffer.device)
        storage = buffer.untyped_storage()
        return zone.set_(storage, self.buffer_bytes, (self.canary.numel(),), (1,))


@dataclass
class RedzoneRegistry:
    """Every poisoned buffer still alive, in allocation order."""

    buffers: list[GuardedBuffer] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def live(self) -> list[tuple[GuardedBuffer, torch.Tensor]]:
        """(buffer, redzone) of each live buffer; forgets the freed ones."""
        with self.lock:
            pairs = [(entry, entry.redzone()) for entry in self.buffers]
            self.buffers = [entry for entry, zone in pairs if zone is not None]
        return [(entry, zone) for entry, zone in pairs if zone is not None]


_REGISTRY = RedzoneRegistry()


def poisoned_buffer(
    shape: int | Sequence[int],
    *,
    dtype: torch.dtype,
    device: str | torch.device,
    name: str,
    fill: float | int = 0,
    redzone_bytes: int = DEFAULT_REDZONE_BYTES,
) -> torch.Tensor:
    """A pre-allocated buffer: torch.full(shape, fill) normally; poisoned with a redzone
    after it when SGLANG_DEBUG_POISON is set."""
    import torch

    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if not config.poison_enabled():
        return torch.full(dims, fill, dtype=dtype, device=device)
    return guarded_buffer(
        dims,
        dtype=dtype,
        device=device,
        name=name,
        fill=poison_value(dtype, name),
        redzone_bytes=redzone_bytes,
    )


def guarded_buffer(
    dims: tuple[int, ...],
    *,
    dtype: torch.dtype,
    device: str | torch.device,
    name: str,
    fill: float | int | complex,
    redzone_bytes: int = DEFAULT_REDZONE_BYTES,
) -> torch.Tensor:
    """A buffer filled with `fill` and guarded by a redzone checked by check(), whatever
    SGLANG_DEBUG_POISON says (poisoned_buffer() and poisoned_allocations() decide that)."""
    import torch

    _validate(name, redzone_bytes)
    buffer_bytes = math.prod(dims) * dtype.itemsize
    allocation = torch.empty(buffer_bytes + redzone_bytes, dtype=torch.uint8, device=device)
    buffer = allocation[:buffer_bytes].view(dtype).view(dims)
    buffer.fill_(fill)
    canary = _canary(redzone_bytes, allocation.device)
    allocation[buffer_bytes:].copy_(canary)
    entry = GuardedBuffer(name, weakref.ref(buffer), buffer_bytes, canary)
    with _REGISTRY.lock:
        _REGISTRY.buffers.append(entry)
    return buffer


def redzone_probe(device: torch.device) -> tuple[list[GuardedBuffer], torch.Tensor | None]:
    """The live buffers on `device` and, on device, [n, 2] int64 rows of (first changed
    byte offset or INT64_MAX, changed byte count), for check() to read in its one copy."""
    import torch

    entries, rows = [], []
    for entry, zone in _REGISTRY.live():
        if zone.device != device:
            continue
        changed = zone != entry.canary
        offsets = torch.arange(changed.numel(), dtype=torch.int64, device=device)
        first = torch.where(changed, offsets, 2**63 - 1).min()
        rows.append(torch.stack([first, changed.sum(dtype=torch.int64)]))
        entries.append(entry)
    return entries, (torch.stack(rows) if rows else None)


def redzone_hits(entries: list[GuardedBuffer], rows: list[list[int]]) -> list[RedzoneHit]:
    """RedzoneHit records for the entries whose host-read row shows changed bytes."""
    hits = []
    for entry, (first, changed) in zip(entries, rows, strict=True):
        if changed:
            hits.append(
                RedzoneHit(
                    name=entry.name,
                    device=str(entry.canary.device),
                    buffer_bytes=entry.buffer_bytes,
                    redzone_bytes=entry.canary.numel(),
                    first_offset=first,
                    changed_bytes=changed,
                )
            )
    return hits


def redzone_devices() -> set[str]:
    """The devices holding at least one live poisoned buffer."""
    return {str(zone.device) for _, zone in _REGISTRY.live()}


def rearm_redzones() -> None:
    """Write the canary back into every live redzone."""
    for entry, zone in _REGISTRY.live():
        zone.copy_(entry.canary)


def poison_value(dtype: torch.dtype, name: str) -> float | int | complex:
    """NaN for floats, -1 for signed ints, the maximum for unsigned ints."""
    import torch

    if dtype.is_floating_point:
        return math.nan
    if dtype.is_complex:
        return complex(math.nan, math.nan)
    if dtype == torch.bool:
        raise DetectUsageError(
            f"poisoned_buffer({name!r}): bool buffers cannot be poisoned (no out-of-range "
            f"value); expected a float, complex or integer dtype"
        )
    info = torch.iinfo(dtype)
    return -1 if info.min < 0 else info.max


def _validate(name: str, redzone_bytes: int) -> None:
    """Reject an empty buffer name or a non-positive redzone size."""
    if not isinstance(name, str) or not name.strip():
        raise DetectUsageError(f"poisoned_buffer(): name must be a non-empty string, got {name!r}")
    if isinstance(redzone_bytes, bool) or not isinstance(redzone_bytes, int) or redzone_bytes < 1:
        raise DetectUsageError(
            f"poisoned_buffer({name!r}): redzone_bytes must be a positive int, "
            f"got {redzone_bytes!r}"
        )


def _canary(redzone_bytes: int, device: torch.device) -> torch.Tensor:
    """A position-dependent byte pattern covering every byte value every 256 bytes."""
    import torch

    positions = torch.arange(redzone_bytes, dtype=torch.int64, device=device)
    return ((positions * _CANARY_MULTIPLIER + _CANARY_OFFSET) % 256).to(torch.uint8)

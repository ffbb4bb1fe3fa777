"""Poisoned pre-allocated buffers (SGLANG_DEBUG_POISON=1), guarded copies, and their redzones.

Poisoned, a buffer starts as NaN (floats) or an out-of-range sentinel (-1 for signed ints,
the maximum for unsigned ones), and is a view of the first bytes of a larger uint8 allocation
whose tail, the redzone, holds a canary byte pattern. check() compares each live redzone
with its canary byte by byte (integer compares on uint8, never float equality); reset()
re-arms them. Allocate before CUDA graph capture; using the buffer inside capture is fine.

guarded_copy() gives an existing tensor the same kind of allocation (its data copied, a
redzone after it; detect.guarded_allocations() does it for every tensor a torch op makes).
When a guarded copy is freed its redzone is compared once more and the result kept for the
next check(), so a write past its end is reported even after the tensor is gone.
"""

from __future__ import annotations

import math
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prtoggle.detect import config
from prtoggle.detect.findings.hits import RedzoneHit
from prtoggle.detect.probes import witness
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
    poisoned_version: int | None = None  # the version counter right after poisoning

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
    """Every poisoned buffer and guarded copy still alive, in allocation order, and the
    last redzone comparisons of freed guarded copies (those freed while a CUDA graph was
    being captured keep their redzone until check(): no kernel may run then)."""

    buffers: list[GuardedBuffer] = field(default_factory=list)
    guarded: dict[int, GuardedBuffer] = field(default_factory=dict)  # by id(entry)
    freed: list[tuple[GuardedBuffer, torch.Tensor]] = field(default_factory=list)
    freed_in_capture: list[tuple[GuardedBuffer, torch.Tensor]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def live(self) -> list[tuple[GuardedBuffer, torch.Tensor]]:
        """(buffer, redzone) of each live buffer; forgets the freed ones."""
        with self.lock:
            pairs = [(entry, entry.redzone()) for entry in self.buffers]
            self.buffers = [entry for entry, zone in pairs if zone is not None]
            pairs.extend((entry, entry.redzone()) for entry in self.guarded.values())
        return [(entry, zone) for entry, zone in pairs if zone is not None]


def redzone_registry() -> RedzoneRegistry:
    """This process's poisoned buffers, redzones and guarded allocations (to read, e.g. in
    tests; reset_registry() or detect.reset() change it)."""
    return _REGISTRY


def reset_registry() -> None:
    """Forget every poisoned buffer, redzone and guarded allocation: a fresh process's state."""
    vars(_REGISTRY).update(vars(RedzoneRegistry()))  # in place: holders of it see the reset


_REGISTRY = RedzoneRegistry()
_CANARIES: dict[tuple[int, str], torch.Tensor] = {}


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

    validate_guard_arguments(
        caller="poisoned_buffer", argument="name", name=name, redzone_bytes=redzone_bytes
    )
    buffer_bytes = math.prod(dims) * dtype.itemsize
    allocation = torch.empty(buffer_bytes + redzone_bytes, dtype=torch.uint8, device=device)
    buffer = allocation[:buffer_bytes].view(dtype).view(dims)
    buffer.fill_(fill)
    canary = _canary(redzone_bytes, allocation.device)
    allocation[buffer_bytes:].copy_(canary)
    entry = GuardedBuffer(name, weakref.ref(buffer), buffer_bytes, canary, buffer._version)
    with _REGISTRY.lock:
        _REGISTRY.buffers.append(entry)
    return buffer


def guarded_copy(
    tensor: torch.Tensor, *, name: str, redzone_bytes: int = DEFAULT_REDZONE_BYTES
) -> torch.Tensor:
    """`tensor`'s data, shape, strides and offset in a new allocation with a redzone after
    its storage. Freed, its redzone is compared one last time (kept for check())."""
    import torch

    validate_guard_arguments(
        caller="guarded_copy", argument="name", name=name, redzone_bytes=redzone_bytes
    )
    storage_bytes = tensor.untyped_storage().nbytes()
    allocation = torch.empty(storage_bytes + redzone_bytes, dtype=torch.uint8, device=tensor.device)
    source = torch.empty(0, dtype=torch.uint8, device=tensor.device)
    source.set_(tensor.untyped_storage(), 0, (storage_bytes,), (1,))
    allocation[:storage_bytes].copy_(source)
    canary = _canary(redzone_bytes, allocation.device)
    zone = allocation[storage_bytes:]
    zone.copy_(canary)
    copy = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    copy.set_(allocation.untyped_storage(), tensor.storage_offset(), tensor.shape, tensor.stride())
    holder: list[GuardedBuffer] = []
    callback = _on_free(zone, holder, _REGISTRY)
    entry = GuardedBuffer(name, weakref.ref(copy, callback), storage_bytes, canary)
    holder.append(entry)
    with _REGISTRY.lock:
        _REGISTRY.guarded[id(entry)] = entry
    return copy


def unwritten_poison_storages() -> set[int]:
    """Storage addresses of the live poisoned buffers not written since they were poisoned
    (deliberate poison, not a result: handing one back is no fault)."""
    found = set()
    with _REGISTRY.lock:
        entries = list(_REGISTRY.buffers)
    for entry in entries:
        buffer = entry.buffer()
        if buffer is not None and entry.poisoned_version == buffer._version:
            found.add(int(buffer.untyped_storage().data_ptr()))
    return found


def live_guarded_buffers() -> list[tuple[GuardedBuffer, torch.Tensor]]:
    """(entry, tensor) of every live poisoned buffer and guarded copy (a snapshot)."""
    with _REGISTRY.lock:
        entries = [*_REGISTRY.buffers, *_REGISTRY.guarded.values()]
    pairs = [(entry, entry.buffer()) for entry in entries]
    return [(entry, buffer) for entry, buffer in pairs if buffer is not None]


def redzone_probe(device: torch.device) -> tuple[list[GuardedBuffer], torch.Tensor | None]:
    """The live buffers on `device` and, on device, [n, 2] int64 rows of (first changed
    byte offset or INT64_MAX, changed byte count), for check() to read in its one copy."""
    import torch

    entries, rows = [], []
    for entry, zone in _REGISTRY.live():
        if zone.device != device or (_is_intact_cpu_copy(entry, zone)):
            continue
        rows.append(_zone_summary(zone, entry.canary))
        entries.append(entry)
    with _REGISTRY.lock:
        freed = [(entry, row) for entry, row in _REGISTRY.freed if row.device == device]
        pending = [(e, zone) for e, zone in _REGISTRY.freed_in_capture if zone.device == device]
    freed.extend((entry, _zone_summary(zone, entry.canary)) for entry, zone in pending)
    entries.extend(entry for entry, _ in freed)
    rows.extend(row for _, row in freed)
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
    """The devices holding at least one live poisoned buffer or a freed guarded copy's
    last redzone comparison."""
    with _REGISTRY.lock:
        freed = {str(row.device) for _, row in _REGISTRY.freed}
        freed |= {str(zone.device) for _, zone in _REGISTRY.freed_in_capture}
    return {str(zone.device) for _, zone in _REGISTRY.live()} | freed


def rearm_redzones() -> None:
    """Write the canary back into every live redzone; forget freed copies' comparisons."""
    for entry, zone in _REGISTRY.live():
        buffer = entry.buffer()
        unwritten = buffer is not None and entry.poisoned_version == buffer._version
        zone.copy_(entry.canary)
        if unwritten and buffer is not None:
            entry.poisoned_version = buffer._version
    with _REGISTRY.lock:
        _REGISTRY.freed.clear()
        _REGISTRY.freed_in_capture.clear()


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


def validate_guard_arguments(
    *, caller: str, argument: str, name: object, redzone_bytes: object
) -> None:
    """Reject an empty buffer name (or prefix) or a non-positive redzone size, naming the
    public function that was called."""
    if not isinstance(name, str) or not name.strip():
        raise DetectUsageError(f"{caller}(): {argument} must be a non-empty string, got {name!r}")
    if isinstance(redzone_bytes, bool) or not isinstance(redzone_bytes, int) or redzone_bytes < 1:
        raise DetectUsageError(
            f"{caller}({name!r}): redzone_bytes must be a positive int, got {redzone_bytes!r}"
        )


def _is_intact_cpu_copy(entry: GuardedBuffer, zone: torch.Tensor) -> bool:
    """A guarded copy on CPU whose redzone is intact: left out of the probe (they can be
    many; on CPU the comparison costs no device sync)."""
    import torch

    copy = entry.poisoned_version is None
    return copy and zone.device.type == "cpu" and torch.equal(zone, entry.canary)


def _zone_summary(zone: torch.Tensor, canary: torch.Tensor) -> torch.Tensor:
    """On device, int64 [first changed byte offset or INT64_MAX, changed byte count]."""
    import torch

    changed = zone != canary
    offsets = torch.arange(changed.numel(), dtype=torch.int64, device=zone.device)
    first = torch.where(changed, offsets, 2**63 - 1).min()
    return torch.stack([first, changed.sum(dtype=torch.int64)])


def _on_free(
    zone: torch.Tensor, entry: list[GuardedBuffer], registry: RedzoneRegistry
) -> Callable[[object], None]:
    """A weakref callback: compare `zone` (which keeps the allocation until then) with the
    canary one last time; keep the result for check() (on CPU only when bytes changed)."""

    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    finalizing = sys.is_finalizing  # module globals are gone at interpreter shutdown

    def compare_on_free(_reference: object) -> None:
        if not entry or finalizing():
            return
        with registry.lock:
            registry.guarded.pop(id(entry[0]), None)
        if zone.is_cuda and witness.is_capturing():
            with registry.lock:  # a kernel now would be captured, not run: compare at check()
                registry.freed_in_capture.append((entry[0], zone))
            return
        with _disable_current_modes():
            if zone.device.type == "cpu" and torch.equal(zone, entry[0].canary):
                return
            summary = _zone_summary(zone, entry[0].canary)
        with registry.lock:
            registry.freed.append((entry[0], summary))

    return compare_on_free


def _canary(redzone_bytes: int, device: torch.device) -> torch.Tensor:
    """A position-dependent byte pattern covering every byte value every 256 bytes
    (one per size and device, shared: never written)."""
    key = (redzone_bytes, str(device))
    canary = _CANARIES.get(key)
    if canary is None:
        canary = _CANARIES[key] = _make_canary(redzone_bytes, device)
    return canary


def _make_canary(redzone_bytes: int, device: torch.device) -> torch.Tensor:
    import torch

    positions = torch.arange(redzone_bytes, dtype=torch.int64, device=device)
    return ((positions * _CANARY_MULTIPLIER + _CANARY_OFFSET) % 256).to(torch.uint8)

"""detect.check_read(): a read of a redzone, reported where a kernel stand-in makes it.

A redzone catches a write past a buffer's end when check() compares it; a read past the end
changes nothing, and the value read (canary bytes) is used at once, typically as an index,
so the kernel faults before any NaN or redzone write could show. On the GPU only a checker
on every load sees such a read (compute-sanitizer's memcheck, and only past the allocation).
Code that computes addresses itself (CPU stand-ins of GPU kernels, torch reference kernels)
can do what an ASan load check does: hand each view it reads through raw addressing to
check_read(), which raises RedzoneRead, naming the buffer and the reader, when the view's
bytes reach into the redzone after a live guarded buffer or copy (poisoned_buffer,
poisoned_allocations, guarded_allocations). With no guarded buffer alive it does nothing.

    row = raw_row(cu_seq_lens, 3)                       # past the end, inside the allocation
    detect.check_read(row, reader="context kernel: cu_seq_lens[3]")
    # RedzoneRead: redzone of buffer aten.cumsum.default in engine.build_metadata: 8 bytes
    #   read by context kernel: cu_seq_lens[3], first at byte 0 past its end (24-byte buffer
    #   on cpu)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prtoggle.detect.findings.hits import RedzoneReadHit, format_hits
from prtoggle.detect.redzones import buffers
from prtoggle.errors import DetectUsageError, RedzoneRead

if TYPE_CHECKING:
    import torch


def check_read(view: torch.Tensor, *, reader: str) -> None:
    """Raise RedzoneRead when a byte `view` spans (storage offset, shape and strides) lies
    in the redzone after a live guarded buffer or copy sharing its storage; `reader` names
    who reads (the kernel and operand). Host-side: the view's storage address is compared,
    not its data, so it costs no device sync."""
    import torch

    if not isinstance(view, torch.Tensor):
        raise DetectUsageError(
            f"check_read(): view must be a torch.Tensor, got {type(view).__name__}"
        )
    if not isinstance(reader, str) or not reader.strip():
        raise DetectUsageError(f"check_read(): reader must be a non-empty string, got {reader!r}")
    span = _byte_span(view)
    if span is None:
        return
    start, stop = span
    address = int(view.untyped_storage().data_ptr())
    for entry, buffer in buffers.live_guarded_buffers():
        if int(buffer.untyped_storage().data_ptr()) != address:
            continue
        zone = (entry.buffer_bytes, entry.buffer_bytes + entry.canary.numel())
        if max(start, zone[0]) >= min(stop, zone[1]):
            continue
        first, count = _bytes_in(view, zone)
        if count:
            hit = RedzoneReadHit(
                name=entry.name,
                device=str(view.device),
                buffer_bytes=entry.buffer_bytes,
                redzone_bytes=entry.canary.numel(),
                first_offset=first - zone[0],
                read_bytes=count,
                reader=reader,
            )
            raise RedzoneRead(format_hits([hit]), sites=(hit.site,), hits=(hit,))


def _byte_span(view: torch.Tensor) -> tuple[int, int] | None:
    """[first byte, one past the last byte) of the storage `view` addresses (None: empty)."""
    if view.numel() == 0:
        return None
    size = view.element_size()
    first = int(view.storage_offset())
    last = first + sum(
        (int(extent) - 1) * step for extent, step in zip(view.shape, view.stride(), strict=True)
    )
    return first * size, (last + 1) * size


def _bytes_in(view: torch.Tensor, zone: tuple[int, int]) -> tuple[int, int]:
    """(first byte, byte count) of the bytes of `view`'s elements inside `zone` (a strided
    view reads only its elements, not the gaps between them)."""
    import torch

    offsets = torch.tensor(view.storage_offset(), dtype=torch.int64)
    for extent, step in zip(view.shape, view.stride(), strict=True):
        offsets = (offsets[..., None] + torch.arange(extent, dtype=torch.int64) * step).flatten()
    size = view.element_size()
    starts = offsets.reshape(-1) * size
    overlap = (starts + size).clamp(max=zone[1]) - starts.clamp(min=zone[0])
    inside = overlap > 0
    if not bool(inside.any()):
        return zone[0], 0
    first = int(starts[inside].min().clamp(min=zone[0]))
    return first, int(overlap[inside].sum())

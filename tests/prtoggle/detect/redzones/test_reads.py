"""Tests of prtoggle.detect.redzones.reads: a read reaching a guarded buffer's redzone."""

from __future__ import annotations

import gc

import pytest
import torch

from prtoggle import detect
from prtoggle.detect.findings.hits import RedzoneReadHit
from prtoggle.detect.redzones import buffers
from prtoggle.errors import DetectUsageError, RedzoneRead, RedzoneViolation


def raw_view(tensor: torch.Tensor, start: int, count: int) -> torch.Tensor:
    """`count` elements from element `start` of `tensor`'s storage, as a raw-pointer kernel
    addresses them (past the tensor's end when start + count is larger)."""
    view = torch.empty(0, dtype=tensor.dtype)
    return view.set_(tensor.untyped_storage(), tensor.storage_offset() + start, (count,), (1,))


def make_lengths() -> torch.Tensor:
    """An engine function allocating a metadata tensor."""
    return torch.cumsum(torch.tensor([3, 4, 5], dtype=torch.int32), dim=0, dtype=torch.int32)


def test_a_read_past_a_poisoned_buffer_names_the_buffer_and_the_reader() -> None:
    buffer = buffers.guarded_buffer((2,), dtype=torch.int64, device="cpu", name="graph.idx", fill=1)
    with pytest.raises(RedzoneRead) as raised:
        detect.check_read(raw_view(buffer, 0, 4), reader="pool kernel: idx[:4]")
    assert str(raised.value) == (
        "1 site hit: redzone of buffer graph.idx: 16 bytes read by pool kernel: idx[:4], "
        "first at byte 0 past its end (16-byte buffer on cpu)"
    )
    assert raised.value.sites == ("graph.idx",)
    assert raised.value.first == RedzoneReadHit(
        name="graph.idx",
        device="cpu",
        buffer_bytes=16,
        redzone_bytes=buffers.DEFAULT_REDZONE_BYTES,
        first_offset=0,
        read_bytes=16,
        reader="pool kernel: idx[:4]",
    )


def test_a_read_redzone_is_a_redzone_violation() -> None:
    assert issubclass(RedzoneRead, RedzoneViolation)


def test_reads_inside_the_buffer_up_to_its_last_byte_pass() -> None:
    buffer = buffers.guarded_buffer((4,), dtype=torch.int32, device="cpu", name="lens", fill=0)
    detect.check_read(raw_view(buffer, 0, 4), reader="k")
    detect.check_read(raw_view(buffer, 3, 1), reader="k")


def test_a_single_element_one_past_the_end_is_reported_at_its_offset() -> None:
    buffer = buffers.guarded_buffer((3, 2), dtype=torch.float32, device="cpu", name="q", fill=0)
    row = torch.empty(0).set_(buffer.untyped_storage(), 2 * 2 + 2 * 2, (2,), (1,))  # row 4
    with pytest.raises(RedzoneRead, match=r"8 bytes read by k: q\[4\], first at byte 8 past"):
        detect.check_read(row, reader="k: q[4]")


def test_a_strided_view_is_checked_by_the_bytes_it_spans() -> None:
    buffer = buffers.guarded_buffer((4, 4), dtype=torch.int32, device="cpu", name="table", fill=0)
    column = torch.empty(0, dtype=torch.int32).set_(buffer.untyped_storage(), 3, (5,), (4,))
    with pytest.raises(RedzoneRead, match=r"4 bytes read by k, first at byte 12 past its end"):
        detect.check_read(column, reader="k")  # elements 3, 7, 11, 15 and 19 (the redzone)


def test_a_tensor_made_under_guarded_allocations_is_named_by_its_op_and_caller() -> None:
    with detect.guarded_allocations():
        lengths = make_lengths()
    with pytest.raises(RedzoneRead) as raised:
        detect.check_read(raw_view(lengths, 3, 1), reader="context kernel: cu_seq_lens[3]")
    assert str(raised.value) == (
        f"1 site hit: redzone of buffer aten.cumsum.default in {__name__}.make_lengths: "
        "4 bytes read by context kernel: cu_seq_lens[3], first at byte 0 past its end "
        "(12-byte buffer on cpu)"
    )


def test_without_guarded_buffers_a_read_past_the_end_is_not_reported() -> None:
    plain = torch.zeros(8, dtype=torch.int64)
    detect.check_read(raw_view(plain[:2], 0, 4), reader="k")  # no redzone: nothing to compare


def test_a_freed_buffer_is_no_longer_matched() -> None:
    buffer = buffers.guarded_buffer((2,), dtype=torch.int64, device="cpu", name="gone", fill=0)
    storage = buffer.untyped_storage()  # keeps the memory alive, not the buffer tensor
    del buffer
    gc.collect()
    view = torch.empty(0, dtype=torch.int64).set_(storage, 0, (4,), (1,))
    detect.check_read(view, reader="k")


def test_an_empty_view_reads_nothing() -> None:
    buffer = buffers.guarded_buffer((2,), dtype=torch.int64, device="cpu", name="b", fill=0)
    detect.check_read(raw_view(buffer, 5, 0), reader="k")


def test_an_empty_reader_is_refused() -> None:
    with pytest.raises(DetectUsageError) as raised:
        detect.check_read(torch.zeros(1), reader=" ")
    assert str(raised.value) == "check_read(): reader must be a non-empty string, got ' '"


def test_a_view_that_is_not_a_tensor_is_refused() -> None:
    with pytest.raises(DetectUsageError) as raised:
        detect.check_read([1, 2], reader="k")  # type: ignore[arg-type]
    assert str(raised.value) == "check_read(): view must be a torch.Tensor, got list"

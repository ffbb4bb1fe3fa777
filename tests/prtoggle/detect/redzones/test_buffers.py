"""Tests of prtoggle.detect.redzones.buffers: poisoned buffers and byte-wise redzones."""

from __future__ import annotations

import gc
import math

import pytest
import torch

from prtoggle import detect
from prtoggle.detect import config
from prtoggle.detect.redzones import buffers
from prtoggle.errors import DetectUsageError, RedzoneViolation


@pytest.fixture
def poisoning_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.POISON_ENV, "1")


def _overrun(buffer: torch.Tensor, extra_elements: int) -> torch.Tensor:
    """A view of `buffer`'s storage reaching `extra_elements` past its end."""
    view = torch.empty(0, dtype=buffer.dtype, device=buffer.device)
    return view.set_(buffer.untyped_storage(), 0, (buffer.numel() + extra_elements,), (1,))


def test_unpoisoned_buffer_is_exactly_torch_full() -> None:
    buffer = detect.poisoned_buffer((3, 5), dtype=torch.float16, device="cpu", name="b", fill=2)
    assert torch.equal(buffer, torch.full((3, 5), 2, dtype=torch.float16))
    assert buffer.dtype == torch.float16
    assert buffer.untyped_storage().nbytes() == 3 * 5 * 2
    assert buffers.redzone_devices() == set()


@pytest.mark.usefixtures("poisoning_on")
@pytest.mark.parametrize(
    ("dtype", "poison_value"),
    [
        (torch.float32, math.nan),
        (torch.bfloat16, math.nan),
        (torch.int32, -1),
        (torch.int64, -1),
        (torch.uint8, 255),
    ],
)
def test_poisoned_buffer_holds_the_poison_value(dtype: torch.dtype, poison_value: float) -> None:
    buffer = detect.poisoned_buffer(6, dtype=dtype, device="cpu", name="b", fill=0)
    assert buffer.shape == (6,)
    assert buffer.dtype == dtype
    expected = torch.full((6,), poison_value, dtype=dtype)
    assert torch.equal(buffer.view(torch.uint8), expected.view(torch.uint8))
    assert buffer.untyped_storage().nbytes() == 6 * dtype.itemsize + buffers.DEFAULT_REDZONE_BYTES


@pytest.mark.usefixtures("poisoning_on")
def test_writes_inside_the_buffer_leave_the_redzone_intact() -> None:
    buffer = detect.poisoned_buffer((4, 4), dtype=torch.int32, device="cpu", name="kv")
    buffer.fill_(7)
    detect.check()


@pytest.mark.usefixtures("poisoning_on")
def test_a_write_past_the_end_is_a_redzone_violation_naming_buffer_and_offset() -> None:
    buffer = detect.poisoned_buffer((2, 8), dtype=torch.int32, device="cpu", name="kv_indices")
    _overrun(buffer, 3)[-2:] = 0  # elements 17 and 18: bytes 4..11 past the end
    with pytest.raises(RedzoneViolation) as excinfo:
        detect.check()
    assert str(excinfo.value) == (
        "1 site hit: redzone of buffer kv_indices: 8 bytes overwritten, first at byte 4 past "
        "its end (64-byte buffer on cpu)"
    )


@pytest.mark.usefixtures("poisoning_on")
def test_redzone_is_compared_bytewise_so_nan_payloads_are_not_equal_to_each_other() -> None:
    buffer = detect.poisoned_buffer(4, dtype=torch.float32, device="cpu", name="f")
    zone = _overrun(buffer, 1)
    zone[4:5].view(torch.int32).fill_(0x7FC00001)  # a NaN with another payload
    with pytest.raises(RedzoneViolation) as excinfo:
        detect.check()
    assert str(excinfo.value).startswith("1 site hit: redzone of buffer f: ")


@pytest.mark.usefixtures("poisoning_on")
def test_reset_rearms_the_redzone_and_later_overruns_are_caught_again() -> None:
    buffer = detect.poisoned_buffer(4, dtype=torch.int64, device="cpu", name="pool")
    _overrun(buffer, 1)[4] = 1
    with pytest.raises(RedzoneViolation):
        detect.check()
    detect.reset()
    detect.check()
    _overrun(buffer, 2)[5] = 1
    with pytest.raises(RedzoneViolation) as excinfo:
        detect.check()
    assert "first at byte 8 past its end" in str(excinfo.value)


@pytest.mark.usefixtures("poisoning_on")
def test_a_freed_buffer_is_forgotten() -> None:
    buffer = detect.poisoned_buffer(4, dtype=torch.int64, device="cpu", name="tmp")
    assert buffers.redzone_devices() == {"cpu"}
    del buffer
    gc.collect()
    assert buffers.redzone_devices() == set()
    detect.check()


@pytest.mark.usefixtures("poisoning_on")
def test_bool_buffers_cannot_be_poisoned() -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.poisoned_buffer(4, dtype=torch.bool, device="cpu", name="mask")
    assert str(excinfo.value) == (
        "poisoned_buffer('mask'): bool buffers cannot be poisoned (no out-of-range value); "
        "expected a float, complex or integer dtype"
    )


@pytest.mark.usefixtures("poisoning_on")
@pytest.mark.parametrize(
    ("name", "redzone_bytes", "message"),
    [
        ("", 64, "poisoned_buffer(): name must be a non-empty string, got ''"),
        ("b", 0, "poisoned_buffer('b'): redzone_bytes must be a positive int, got 0"),
    ],
)
def test_bad_names_and_redzone_sizes_are_refused(
    name: str, redzone_bytes: int, message: str
) -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.poisoned_buffer(
            4, dtype=torch.int32, device="cpu", name=name, redzone_bytes=redzone_bytes
        )
    assert str(excinfo.value) == message


@pytest.mark.usefixtures("poisoning_on")
def test_a_poisoned_buffer_counts_as_unwritten_until_written() -> None:
    buffer = detect.poisoned_buffer((2, 3), dtype=torch.float32, device="cpu", name="graph.h")
    address = buffer.untyped_storage().data_ptr()
    assert buffers.unwritten_poison_storages() == {address}
    detect.reset()  # re-arming the redzone is no write of the buffer
    assert buffers.unwritten_poison_storages() == {address}
    buffer[0].fill_(1.0)
    assert buffers.unwritten_poison_storages() == set()


def test_a_guarded_copy_keeps_the_data_and_layout_with_a_redzone_after_it() -> None:
    source = torch.arange(6, dtype=torch.int32).reshape(2, 3).t()
    copy = buffers.guarded_copy(source, name="copy", redzone_bytes=64)
    assert torch.equal(copy, source)
    assert (copy.stride(), copy.storage_offset()) == (source.stride(), 0)
    assert copy.untyped_storage().nbytes() == 6 * 4 + 64
    assert buffers.unwritten_poison_storages() == set()  # real data, not poison
    _overrun(copy, 1)[-1] = 9
    with pytest.raises(
        RedzoneViolation, match=r"redzone of buffer copy: 4 bytes overwritten, first at byte 0 "
    ):
        detect.check()

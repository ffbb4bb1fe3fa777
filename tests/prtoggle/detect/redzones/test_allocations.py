"""Tests of detect.redzones.allocations: a region's torch factory calls routed into redzones."""

from __future__ import annotations

import pytest
import torch

from prtoggle import detect
from prtoggle.detect import config
from prtoggle.detect.redzones import buffers
from prtoggle.errors import DetectUsageError, RedzoneViolation


@pytest.fixture
def poisoning_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.POISON_ENV, "1")


def _storage_bytes(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().nbytes()


def test_without_poisoning_the_block_changes_nothing() -> None:
    with detect.poisoned_allocations("engine.init") as routing:
        buffer = torch.zeros((2, 3), dtype=torch.int32)
    assert torch.equal(buffer, torch.zeros((2, 3), dtype=torch.int32))
    assert _storage_bytes(buffer) == 2 * 3 * 4
    assert routing.allocations == []
    assert routing.passed_through == []
    assert buffers.redzone_devices() == set()


@pytest.mark.usefixtures("poisoning_on")
def test_factory_calls_keep_their_values_and_gain_a_redzone_named_in_order() -> None:
    with detect.poisoned_allocations("engine.init", redzone_bytes=64) as routing:
        zeros = torch.zeros(2, 3, dtype=torch.int32)
        ones = torch.ones((4,), dtype=torch.float16)
        full = torch.full((2, 2), 7)
        sized = torch.zeros(size=torch.Size([5]))
        empty = torch.empty(3, dtype=torch.int64)
    assert torch.equal(zeros, torch.zeros(2, 3, dtype=torch.int32))
    assert torch.equal(ones, torch.ones(4, dtype=torch.float16))
    assert torch.equal(full, torch.full((2, 2), 7))
    assert full.dtype == torch.int64
    assert torch.equal(sized, torch.zeros(5))
    assert empty.tolist() == [-1, -1, -1]
    sizes = [_storage_bytes(t) for t in (zeros, ones, full, sized, empty)]
    assert sizes == [24 + 64, 8 + 64, 32 + 64, 20 + 64, 24 + 64]
    assert routing.allocations == [
        detect.RoutedAllocation("engine.init[0]", "zeros", (2, 3), "torch.int32"),
        detect.RoutedAllocation("engine.init[1]", "ones", (4,), "torch.float16"),
        detect.RoutedAllocation("engine.init[2]", "full", (2, 2), "torch.int64"),
        detect.RoutedAllocation("engine.init[3]", "zeros", (5,), "torch.float32"),
        detect.RoutedAllocation("engine.init[4]", "empty", (3,), "torch.int64"),
    ]
    detect.check()


@pytest.mark.usefixtures("poisoning_on")
def test_a_write_past_a_routed_buffer_is_a_redzone_violation_naming_it() -> None:
    with detect.poisoned_allocations("engine.init") as routing:
        torch.zeros(4, dtype=torch.int32)
        rows = torch.zeros((2, 4), dtype=torch.int32)
    assert [allocation.name for allocation in routing.allocations] == [
        "engine.init[0]",
        "engine.init[1]",
    ]
    # the redzone must be there before writing past the buffer (else: real host memory)
    assert _storage_bytes(rows) == 32 + buffers.DEFAULT_REDZONE_BYTES
    overrun = torch.empty(0, dtype=torch.int32).set_(rows.untyped_storage(), 0, (11,), (1,))
    overrun[8:].fill_(5)
    with pytest.raises(RedzoneViolation) as caught:
        detect.check()
    assert str(caught.value) == (
        "1 site hit: redzone of buffer engine.init[1]: 12 bytes overwritten, first at byte 0 "
        "past its end (32-byte buffer on cpu)"
    )


@pytest.mark.usefixtures("poisoning_on")
def test_calls_it_cannot_reproduce_are_left_to_torch_and_listed() -> None:
    with detect.poisoned_allocations("engine.init") as routing:
        grad = torch.zeros(3, requires_grad=True)
        flags = torch.empty(2, dtype=torch.bool)
        steps = torch.arange(4)
    assert grad.requires_grad
    assert _storage_bytes(grad) == 12
    assert _storage_bytes(flags) == 2
    assert steps.tolist() == [0, 1, 2, 3]
    assert routing.allocations == []
    assert routing.passed_through == [
        "zeros(3,) (keywords requires_grad)",
        "empty(2,) (bool empty)",
    ]


@pytest.mark.parametrize(
    ("prefix", "redzone_bytes", "message"),
    [
        ("", 64, "poisoned_allocations(): prefix must be a non-empty string, got ''"),
        (
            "engine.init",
            0,
            "poisoned_allocations('engine.init'): redzone_bytes must be a positive int, got 0",
        ),
    ],
)
def test_a_bad_prefix_or_redzone_size_is_an_error_naming_it(
    prefix: str, redzone_bytes: int, message: str
) -> None:
    blocks = detect.poisoned_allocations(prefix, redzone_bytes=redzone_bytes)
    with pytest.raises(DetectUsageError) as caught, blocks:
        pass
    assert str(caught.value) == message


@pytest.mark.usefixtures("poisoning_on")
def test_an_invalid_factory_call_still_gets_torchs_own_error() -> None:
    with detect.poisoned_allocations("engine.init") as routing, pytest.raises(TypeError):
        torch.full((2,))  # type: ignore[call-overload]
    assert routing.allocations == []

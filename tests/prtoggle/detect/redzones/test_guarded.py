"""Tests of prtoggle.detect.redzones.guarded: a redzone after every tensor a torch op allocates."""

from __future__ import annotations

import gc

import pytest
import torch

from prtoggle import detect
from prtoggle.detect.redzones import buffers, guarded
from prtoggle.errors import RedzoneViolation


def _write_past_end(tensor: torch.Tensor, extra: int, value: float) -> None:
    """What a raw-pointer kernel does when it writes `extra` elements past `tensor`'s end."""
    view = torch.empty(0, dtype=tensor.dtype)
    view.set_(tensor.untyped_storage(), tensor.storage_offset(), (tensor.numel() + extra,), (1,))
    view[tensor.numel() :] = value


def make_output(like: torch.Tensor) -> torch.Tensor:
    """An engine function allocating a kernel's output."""
    return torch.zeros_like(like)


def test_a_write_past_a_new_tensor_is_reported_with_its_op_and_caller() -> None:
    with guarded.guarded_allocations():
        out = make_output(torch.ones(4))
        _write_past_end(out, 2, 5.0)
    with pytest.raises(RedzoneViolation) as raised:
        detect.check()
    assert str(raised.value) == (
        "1 site hit: redzone of buffer aten.zeros_like.default in "
        f"{__name__}.make_output: 8 bytes overwritten, first at byte 0 past its end "
        "(16-byte buffer on cpu)"
    )


def test_a_write_past_the_end_is_still_reported_after_the_tensor_is_freed() -> None:
    with guarded.guarded_allocations():
        out = make_output(torch.ones(4))
        _write_past_end(out, 1, 5.0)
        del out
        gc.collect()
    assert buffers.redzone_registry().guarded == {}
    with pytest.raises(RedzoneViolation, match=r"aten\.zeros_like\.default in .*make_output: 4 "):
        detect.check()
    detect.reset()
    detect.check()  # reset() forgets the freed copy's comparison


def test_guarded_copies_keep_values_shape_and_strides() -> None:
    base = torch.arange(12.0).reshape(3, 4)
    with guarded.guarded_allocations():
        made = base.t().contiguous() * 2  # a new tensor: guarded
        transposed = made.t()  # a view: the same memory, not copied
        made.add_(1)  # in place: the same tensor
    assert torch.equal(made, base.t() * 2 + 1)
    assert made.untyped_storage().nbytes() == 12 * 4 + buffers.DEFAULT_REDZONE_BYTES
    assert transposed.untyped_storage().data_ptr() == made.untyped_storage().data_ptr()
    assert transposed.stride() == (1, 3)
    assert base.untyped_storage().nbytes() == 12 * 4  # made outside the block: untouched


def test_writes_inside_guarded_tensors_and_freed_ones_report_nothing() -> None:
    with guarded.guarded_allocations():
        out = make_output(torch.ones(8))
        out[:] = 3.0
        del out
        gc.collect()
    detect.check()


def test_allocation_site_names_the_engine_caller_and_skips_prtoggle() -> None:
    assert guarded.allocation_site("op") == (
        f"op in {__name__}.test_allocation_site_names_the_engine_caller_and_skips_prtoggle"
    )
    assert _called_from_prtoggle() is None


def _called_from_prtoggle() -> str | None:
    """allocation_site() as seen from a frame whose module is prtoggle's."""
    namespace = {"__name__": "prtoggle.detect.fake", "site": guarded.allocation_site}
    exec("def probe():\n    return site('op')\n", namespace)  # a module stand-in
    return namespace["probe"]()  # type: ignore[operator,no-any-return]


# ---------------------------------------------------------------- GPU (run with -m gpu)


def chain(x: torch.Tensor) -> torch.Tensor:
    """Temporaries the graph pool frees and reuses during capture."""
    return ((x * 2).sin() + 1).cos().sum(dim=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_cuda_graph_captured_in_the_block_is_left_unguarded_and_reports_nothing() -> None:
    static = torch.ones(64, 32, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with guarded.guarded_allocations():
        eager = make_output(static)  # guarded: outside the capture
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            chain(static)  # warm-up, eager: guarded copies, freed on the side stream
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            out = chain(static)
        graph.replay()
    torch.cuda.synchronize()
    assert eager.untyped_storage().nbytes() == 64 * 32 * 4 + buffers.DEFAULT_REDZONE_BYTES
    assert out.untyped_storage().nbytes() == 32 * 4  # made in the capture: no redzone
    assert torch.allclose(out, chain(static))
    detect.check()  # nothing past any end was written: clean


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_guarded_copy_freed_during_capture_is_compared_at_the_next_check() -> None:
    with guarded.guarded_allocations():
        doomed = make_output(torch.ones(4, device="cuda"))
    _write_past_end_cuda(doomed, 1)
    graph = torch.cuda.CUDAGraph()
    static = torch.ones(8, device="cuda")
    with torch.cuda.graph(graph):
        del doomed  # freed while capturing: no comparison kernel may run now
        gc.collect()
        static.mul_(2)
    assert len(buffers.redzone_registry().freed_in_capture) == 1
    with pytest.raises(RedzoneViolation, match=r"make_output: 4 bytes overwritten"):
        detect.check()
    detect.reset()
    assert buffers.redzone_registry().freed_in_capture == []


def _write_past_end_cuda(tensor: torch.Tensor, extra: int) -> None:
    view = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    view.set_(tensor.untyped_storage(), tensor.storage_offset(), (tensor.numel() + extra,), (1,))
    view[tensor.numel() :] = 5.0

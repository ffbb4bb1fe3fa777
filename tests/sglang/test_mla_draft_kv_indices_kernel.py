"""#27460's original failure on real sglang 0.5.23: the draft kv-indices Triton kernel overflows.

The real `FlashInferMLAMultiStepDraftBackend` allocates its CUDA graph kv_indices buffer in
`init_cuda_graph_state` (devices moved to the CPU, the allocation routed into a redzoned
buffer by `detect.poisoned_allocations`), then the real `init_forward_metadata_out_graph`
-> `common_template` launches sglang's Triton kernel `generate_draft_decode_kv_indices`
(TRITON_INTERPRET=1, set by tests/conftest.py) on a draft-decode batch as the EAGLE draft
CUDA graph runner hands it at replay. Reverted (`yaml/sglang/27460.yaml`), the rows are
max_bs * max_context_len wide instead of max_bs * topk * max_context_len: each row spills
into the next and the last one past the buffer, into the redzone. The kernel is launched
only once the redzone is in place, so the overflow never reaches other host memory.

The `gpu` tests run the same path on a CUDA GPU: sglang's Triton kernel compiled for the
device, the graph buffer a redzoned CUDA allocation, the overflow found by `detect.check()`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from stand_ins import cuda_devices_on_cpu, draft_decode_batch, mla_draft_backend

import prtoggle
from prtoggle import detect
from prtoggle.detect import config
from prtoggle.detect.redzones import buffers
from prtoggle.errors import RedzoneViolation

pytestmark = pytest.mark.sglang

MAX_BS, TOPK, NUM_STEPS, MAX_CONTEXT_LEN = 2, 2, 3, 8
SEQ_LENS = [5, 5]
"""Step i (i + 1 appended tokens) uses 2 * 10 + 4 * (i + 1) = 24, 28, 32 row entries: the
fixed width 2 * 2 * 8 = 32 holds them all, the reverted 2 * 8 = 16 none."""
PREFIX = "flashinfer_mla.init_cuda_graph_state"
INT32_BYTES = 4


@pytest.fixture(autouse=True)
def redzones_and_range_probes(
    monkeypatch: pytest.MonkeyPatch, fresh_detection_state: None
) -> Iterator[None]:
    """Fresh process-wide detection state with poisoning and range probes on, mode raise."""
    for name in (config.NAN_DETECTION_ENV, config.MODE_ENV, config.SGLANG_INVARIANT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(config.POISON_ENV, "1")
    monkeypatch.setenv(config.OOB_DETECTION_ENV, "1")
    yield


def test_the_fixed_graph_buffer_holds_every_row_the_real_kernel_writes() -> None:
    backend, routing = capture_and_replay()
    assert routing.allocations == [
        detect.RoutedAllocation(f"{PREFIX}[0]", "zeros", (NUM_STEPS, 32), "torch.int32")
    ]
    assert backend.kv_indptr[:, -1].tolist() == [24, 28, 32]
    assert detect.report().hits == ()
    detect.check()


def test_reverting_27460_the_real_kernel_writes_past_the_narrowed_buffer_into_its_redzone() -> None:
    fixed, _ = capture_and_replay()
    with prtoggle.reverted(27460):
        backend, routing = capture_and_replay()
    assert routing.allocations == [
        detect.RoutedAllocation(f"{PREFIX}[0]", "zeros", (NUM_STEPS, 16), "torch.int32")
    ]
    with pytest.raises(RedzoneViolation) as caught:
        detect.check()
    assert str(caught.value) == (
        "3 sites hit, in first-hit order: "
        "oob at flashinfer_mla.draft_kv_indices[step=0].row_width: 2 elements in rows 3..4, "
        "values 18..24 outside [0, 17), first hit in phase eager at step 0, lowest flat "
        "index 3; "
        "oob at flashinfer_mla.draft_kv_indices[step=1].row_width: 2 elements in rows 3..4, "
        "values 21..28 outside [0, 17), first hit in phase eager at step 0, lowest flat "
        "index 3; "
        f"redzone of buffer {PREFIX}[0]: 64 bytes overwritten, first at byte 0 past its end "
        "(192-byte buffer on cpu)"
    )
    assert caught.value.sites[-1] == f"{PREFIX}[0]"
    # The 16 int32 past the end are the last row's entries 16..31: what the fixed run keeps
    # inside its 32-wide row.
    assert past_the_end(backend.cuda_graph_kv_indices, 16) == (
        fixed.cuda_graph_kv_indices[NUM_STEPS - 1, 16:].tolist()
    )


@pytest.mark.gpu
def test_on_the_gpu_the_fixed_graph_buffer_holds_every_row_the_compiled_kernel_writes() -> None:
    backend, routing = capture_and_replay(device="cuda")
    assert routing.allocations == [
        detect.RoutedAllocation(f"{PREFIX}[0]", "zeros", (NUM_STEPS, 32), "torch.int32")
    ]
    assert backend.cuda_graph_kv_indices.is_cuda
    assert backend.kv_indptr[:, -1].tolist() == [24, 28, 32]
    detect.check()


@pytest.mark.gpu
def test_on_the_gpu_reverting_27460_the_compiled_kernel_writes_into_the_redzone() -> None:
    fixed, _ = capture_and_replay(device="cuda")
    with prtoggle.reverted(27460):
        backend, _ = capture_and_replay(device="cuda")
    assert tuple(backend.cuda_graph_kv_indices.shape) == (NUM_STEPS, 16)
    with pytest.raises(RedzoneViolation) as caught:
        detect.check()
    assert str(caught.value).endswith(
        f"redzone of buffer {PREFIX}[0]: 64 bytes overwritten, first at byte 0 past its end "
        "(192-byte buffer on cuda:0)"
    )
    assert caught.value.sites[-1] == f"{PREFIX}[0]"
    assert past_the_end(backend.cuda_graph_kv_indices, 16) == (
        fixed.cuda_graph_kv_indices[NUM_STEPS - 1, 16:].tolist()
    )


def capture_and_replay(*, device: str = "cpu") -> tuple[Any, detect.AllocationRouting]:
    """The real init_cuda_graph_state (its allocation redzoned), then the real replay-time
    init_forward_metadata_out_graph running the kv-indices kernel once, on `device` (on the
    CPU, sglang's hard-coded `device="cuda"` allocations are moved to the CPU and the
    kernel runs in Triton's interpreter)."""
    if device == "cuda" and os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("TRITON_INTERPRET=1 on a GPU run: the kernel would not be compiled")
    backend = mla_draft_backend(
        max_bs=MAX_BS,
        topk=TOPK,
        num_steps=NUM_STEPS,
        max_context_len=MAX_CONTEXT_LEN,
        device=device,
    )
    on_device = cuda_devices_on_cpu() if device == "cpu" else contextlib.nullcontext()
    with detect.poisoned_allocations(PREFIX) as routing, on_device:
        backend.init_cuda_graph_state(MAX_BS, MAX_BS * TOPK)
    require_redzone(backend.cuda_graph_kv_indices)
    batch = draft_decode_batch(SEQ_LENS, topk=TOPK, device=device)
    backend.init_forward_metadata_out_graph(batch)
    return backend, routing


def require_redzone(buffer: torch.Tensor) -> None:
    """Fail before any launch unless `buffer` is followed by a whole redzone in its storage
    (the interpreted kernel's stray stores would otherwise land in other host memory)."""
    spare = buffer.untyped_storage().nbytes() - buffer.numel() * buffer.element_size()
    if buffer.storage_offset() != 0 or spare < buffers.DEFAULT_REDZONE_BYTES:
        pytest.fail(
            f"the graph kv_indices buffer {tuple(buffer.shape)} is not followed by a "
            f"{buffers.DEFAULT_REDZONE_BYTES}-byte redzone ({spare} spare bytes): not launching "
            "the kernel (is SGLANG_DEBUG_POISON on and the allocation routed?)"
        )


def past_the_end(buffer: torch.Tensor, count: int) -> list[int]:
    """The `count` int32 values in the storage right after `buffer` (its redzone)."""
    view = torch.empty(0, dtype=torch.int32, device=buffer.device)
    view.set_(buffer.untyped_storage(), buffer.numel(), (count,), (1,))
    return view.tolist()

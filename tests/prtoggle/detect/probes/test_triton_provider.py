"""Tests of prtoggle.detect.probes.triton_provider: agreement with the torch provider (CPU through
TRITON_INTERPRET=1, and CUDA), no host sync, CUDA graph capture and replay (GPU, marked)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from prtoggle import detect
from prtoggle.detect.findings.hits import Hit, SiteHit
from prtoggle.detect.probes import site_probes, witness
from prtoggle.detect.redzones import buffers
from prtoggle.errors import NaNDetected, OOBDetected, RedzoneViolation

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INDEX_DTYPES = [torch.int16, torch.int32, torch.int64]
interpreter_only = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1",
    reason="Triton on CPU tensors needs TRITON_INTERPRET=1 (tests/conftest.py sets it "
    "without a GPU)",
)


def _probe_sequence(prefix: str, device: torch.device, provider: str) -> None:
    """Probe several blocks' worth of data over two steps and phases, every dtype."""
    size = 3000  # three blocks of 1024
    for dtype in FLOAT_DTYPES:
        values = torch.zeros(size, dtype=dtype, device=device)
        values[[5, 1500, 2999]] = float("nan")
        values[[7, 2048]] = float("inf")
        values[2049] = float("-inf")
        detect.maybe_detect_nan(values, f"{prefix}.nan.{dtype}", provider=provider)
        detect.maybe_detect_inf(values, f"{prefix}.inf.{dtype}", provider=provider)
    for dtype in INDEX_DTYPES:
        indices = torch.arange(size, dtype=dtype, device=device).remainder(100) - 3
        high = torch.tensor([90], dtype=torch.int32, device=device)
        detect.maybe_detect_oob(indices, 0, 95, f"{prefix}.oob.int.{dtype}", provider=provider)
        detect.maybe_detect_oob(
            indices,
            torch.tensor(-1, device=device),
            high,
            f"{prefix}.oob.t.{dtype}",
            provider=provider,
        )
    detect.set_step(5)
    with detect.phase("replay"):
        late = torch.full((2500,), float("nan"), device=device)
        detect.maybe_detect_nan(late, f"{prefix}.nan.{torch.float32}", provider=provider)
        fresh = torch.tensor([1, 2, 2**41], device=device)
        detect.maybe_detect_oob(fresh, 0, 2**40, f"{prefix}.oob.late", provider=provider)
    detect.set_step(0)


def _hits_by_site(prefix: str) -> dict[str, Hit]:
    """This prefix's hits keyed by the rest of the site name, device left out, first-hit
    order counted from this prefix's first hit."""
    hits = [hit for hit in detect.report().hits if hit.site.startswith(prefix + ".")]
    assert all(isinstance(hit, SiteHit) for hit in hits)
    base = min(hit.order for hit in hits if isinstance(hit, SiteHit))
    return {
        hit.site[len(prefix) + 1 :]: dataclasses.replace(
            hit, site="", device="", order=hit.order - base
        )
        for hit in hits
        if isinstance(hit, SiteHit)
    }


def _assert_providers_agree(device: torch.device) -> None:
    _probe_sequence("torch", torch.device("cpu"), "torch")
    _probe_sequence("triton", device, "triton")
    reference, kernel = _hits_by_site("torch"), _hits_by_site("triton")
    assert len(reference) == 4 * 2 + 3 * 2 + 1
    assert kernel == reference
    expected = SiteHit(
        kind="oob",
        site="",
        device="",
        count=1,
        lowest_index=2,
        phase="replay",
        step=5,
        min_value=2**41,
        max_value=2**41,
        low=0,
        high=2**40,
        order=len(reference) - 1,
        first_row=2,
        last_row=2,
    )
    assert reference["oob.late"] == expected
    assert sorted(hit.order for hit in reference.values()) == list(range(len(reference)))


@interpreter_only
@pytest.mark.usefixtures("detection_on")
def test_triton_kernels_match_the_torch_provider_on_cpu_in_interpreter_mode() -> None:
    _assert_providers_agree(torch.device("cpu"))


@interpreter_only
@pytest.mark.usefixtures("detection_on")
def test_triton_nan_probe_reports_first_phase_and_lowest_index_on_cpu() -> None:
    t = torch.zeros(2, 1500)
    t[1, 1000] = float("nan")
    t[0, 1400] = float("nan")
    with detect.phase("capture-warmup"):
        detect.maybe_detect_nan(t, "attn.out", provider="triton")
    with pytest.raises(NaNDetected) as excinfo:
        detect.check()
    assert str(excinfo.value) == (
        "1 site hit: nan at attn.out: 2 elements in rows 0..1, first hit in phase capture-warmup "
        "at step 0, lowest flat index 1400"
    )


# ---------------------------------------------------------------- GPU (run with -m gpu)


@contextmanager
def _no_host_sync() -> Iterator[None]:
    """Make any synchronising CUDA call inside the block raise."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def _probe_all(x: torch.Tensor, indices: torch.Tensor, high: torch.Tensor, tag: str) -> None:
    detect.maybe_detect_nan(x, f"{tag}.x")
    detect.maybe_detect_inf(x, f"{tag}.x")
    detect.maybe_detect_oob(indices, 0, high, f"{tag}.idx")
    detect.maybe_detect_oob(indices, -1, 64, f"{tag}.idx_int_bounds")


@pytest.mark.gpu
@pytest.mark.usefixtures("detection_on")
@pytest.mark.parametrize("provider", ["triton", "torch"])
def test_probes_launch_without_any_host_sync_on_cuda(provider: str) -> None:
    device = torch.device("cuda")
    detect.prepare_device(device)
    x = torch.randn(5000, device=device, dtype=torch.bfloat16)
    indices = torch.randint(0, 64, (300,), device=device, dtype=torch.int32)
    high = torch.full((1,), 64, device=device, dtype=torch.int64)
    for _ in range(2):  # the first call compiles the Triton kernels
        with _no_host_sync():
            detect.maybe_detect_nan(x, "s.x", provider=provider)
            detect.maybe_detect_inf(x, "s.x", provider=provider)
            detect.maybe_detect_oob(indices, 0, high, "s.idx", provider=provider)
            detect.set_step(3)
            with detect.phase("replay"):
                detect.maybe_detect_oob(indices, 0, 64, "s.idx2", provider=provider)
    detect.check()


@pytest.mark.gpu
@pytest.mark.usefixtures("detection_on")
def test_triton_on_cuda_agrees_with_the_torch_provider_on_cpu() -> None:
    _assert_providers_agree(torch.device("cuda"))


@pytest.mark.gpu
@pytest.mark.usefixtures("detection_on")
def test_probes_captured_in_a_cuda_graph_report_the_replay_phase_and_step() -> None:
    device = torch.device("cuda")
    x = torch.zeros(4096, device=device)
    indices = torch.zeros(64, device=device, dtype=torch.int32)
    high = torch.full((1,), 64, device=device, dtype=torch.int64)
    detect.prepare_device(device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), detect.phase("capture-warmup"):
        for _ in range(2):
            _probe_all(x, indices, high, "g")
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with detect.phase("capture"), torch.cuda.graph(graph):
        _probe_all(x, indices, high, "g")
    detect.check()
    with detect.phase("replay"):
        detect.set_step(1)
        graph.replay()
    detect.check()
    x[100] = float("nan")
    x[4000] = float("nan")
    indices[5] = 70
    with detect.phase("replay"):
        for step in (2, 3):
            detect.set_step(step)
            with _no_host_sync():
                graph.replay()
    high.fill_(80)  # a per-step bound held on device: 70 is now in range
    detect.set_step(4)
    with detect.phase("replay"):
        graph.replay()
    with pytest.raises(OOBDetected) as excinfo:
        detect.check()
    assert str(excinfo.value) == (
        "3 sites hit, in first-hit order: nan at g.x: 6 elements in rows 100..4000, first hit "
        "in phase replay at step 2, lowest flat index 100; oob at g.idx: 2 elements in row 5, "
        "value 70 outside [0, 64), first hit in phase replay at step 2, lowest flat index 5; "
        "oob at g.idx_int_bounds: 3 elements in row 5, value 70 outside [-1, 64), first hit in "
        "phase replay at step 2, lowest flat index 5"
    )


@pytest.mark.gpu
@pytest.mark.usefixtures("detection_on")
def test_cuda_process_keeps_working_after_a_detection() -> None:
    device = torch.device("cuda")
    bad = torch.full((8, 8), float("nan"), device=device)
    detect.maybe_detect_nan(bad, "m")
    with pytest.raises(NaNDetected):
        detect.check()
    product = torch.ones(64, 64, device=device) @ torch.ones(64, 64, device=device)
    torch.cuda.synchronize()
    assert product[0, 0].item() == 64.0
    detect.reset()
    detect.maybe_detect_nan(product, "m")
    detect.check()
    detect.maybe_detect_nan(bad, "m")
    with pytest.raises(NaNDetected) as excinfo:
        detect.check()
    assert str(excinfo.value) == (
        "1 site hit: nan at m: 64 elements in rows 0..7, first hit in phase eager at step 0, "
        "lowest flat index 0"
    )


@pytest.mark.gpu
def test_redzone_overwrite_inside_a_cuda_graph_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(detect.config.POISON_ENV, "1")
    device = torch.device("cuda")
    buffer = detect.poisoned_buffer((16,), dtype=torch.int32, device=device, name="kv_indices")
    too_long = torch.empty(0, dtype=torch.int32, device=device)
    too_long.set_(buffer.untyped_storage(), 0, (20,), (1,))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        too_long.fill_(3)
    detect.check()
    graph.replay()
    with pytest.raises(RedzoneViolation) as excinfo:
        detect.check()
    assert str(excinfo.value) == (
        "1 site hit: redzone of buffer kv_indices: 16 bytes overwritten, first at byte 0 "
        "past its end (64-byte buffer on cuda:0)"
    )
    detect.reset()
    detect.check()
    assert buffers.redzone_devices() == {"cuda:0"}


@interpreter_only
@pytest.mark.usefixtures("detection_on")
def test_first_hits_of_one_launch_follow_tensor_order_whichever_program_sees_them() -> None:
    late = torch.zeros(3000)  # three blocks: only the third program sees its NaN
    late[2500] = float("nan")
    early = torch.zeros(10)  # the first program sees this one
    early[0] = float("nan")
    site_probes.record_float_tensors([("late", late), ("early", early)], provider="triton")
    hits = detect.report().hits
    assert [(hit.site, hit.order, hit.first_row) for hit in hits if isinstance(hit, SiteHit)] == [
        ("late", 0, 2500),
        ("early", 1, 0),
    ]
    table = witness.witness_tables().tables["cpu"]
    assert table.claim_locks.count_nonzero().item() == 0  # released for the next launch
    before = table.rows.clone()
    site_probes.record_float_tensors([("late", torch.zeros(3000))], provider="triton")
    assert torch.equal(table.rows, before)  # a clean launch writes nothing


_COMPILE_SCRIPT = r"""
import re
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from prtoggle.detect.probes import triton_provider as tp

TABLE = {"rows_ptr": "*i64", "when_ptr": "*i64", "sequence_ptr": "*i64", "lock_ptr": "*i64"}
FLOAT = {"xs": ("*bf16", "*fp32"), "ns": ("i32", "i64"), "widths": ("i32", "i32"),
         "slots": ("i32", "i32"), **TABLE,
         "COUNT_TENSORS": "constexpr", "CHECK_INF": "constexpr", "BLOCK": "constexpr"}
OOB = {"x_ptr": "*i32", "n": "i64", "width": "i32", "low_ptr": "*i64", "high_ptr": "*i32",
       "low_value": "i32", "high_value": "i64", "row_ptr": "*i64", "when_ptr": "*i64",
       "sequence_ptr": "*i64", "lock_ptr": "*i64", "LOW_IS_PTR": "constexpr",
       "HIGH_IS_PTR": "constexpr", "BLOCK": "constexpr"}
# Triton may turn tuple elements equal to 1 into constants: the kernel must compile so too.
ONES = {**FLOAT, "ns": ("constexpr", "i64"), "widths": ("constexpr", "i32"),
        "slots": ("constexpr", "i32")}
atomics = set()
for fn, signature, constexprs in [
    (tp._float_probe_kernel, ONES, {(1, 0): 1, (2, 0): 1, (3, 0): 1, "COUNT_TENSORS": 2,
                                    "CHECK_INF": False, "BLOCK": 1024}),
    (tp._float_probe_kernel, FLOAT, {"COUNT_TENSORS": 2, "CHECK_INF": False, "BLOCK": 1024}),
    (tp._float_probe_kernel, FLOAT, {"COUNT_TENSORS": 2, "CHECK_INF": True, "BLOCK": 1024}),
    (tp._oob_probe_kernel, OOB, {"LOW_IS_PTR": False, "HIGH_IS_PTR": True, "BLOCK": 1024}),
]:
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    atomics |= {".".join(op) for op in re.findall(r"atom\.[\w.]*?\.(add|exch|max|min)\.(\w+)", ptx)}
print(sorted(atomics))
"""


@pytest.mark.slow
def test_kernels_compile_to_sm90_with_64_bit_atomics_without_a_gpu(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", _COMPILE_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['add.u64', 'exch.b64', 'max.s64', 'min.s64']\n"

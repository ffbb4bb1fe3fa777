"""Tests of detect.probes.site_probes with the torch provider: gating, validation, recording."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import torch

from prtoggle import detect
from prtoggle.detect.findings.hits import SiteHit
from prtoggle.detect.probes import witness
from prtoggle.errors import DetectUsageError, NaNDetected


def _nan_at(*positions: int, size: int = 10, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    t = torch.zeros(size, dtype=dtype)
    t[list(positions)] = float("nan")
    return t


def test_probes_do_nothing_while_their_variables_are_off() -> None:
    detect.maybe_detect_nan(_nan_at(1), "a")
    detect.maybe_detect_inf(torch.tensor([float("inf")]), "b")
    detect.maybe_detect_oob(torch.tensor([-5]), 0, 1, "c")
    registry = witness.witness_tables()
    assert (registry.slots, registry.tables) == ({}, {})
    detect.check()


def test_importing_and_calling_probes_while_off_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from prtoggle import detect\n"
        "detect.maybe_detect_nan(None, 'a'); detect.maybe_detect_oob(None, 0, 1, 'b')\n"
        "detect.maybe_check_host_range(9, 0, 1, 'c'); detect.check(); detect.reset()\n"
        "print('torch' in sys.modules, 'triton' in sys.modules)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "SGLANG_SPEC_OOB_DETECTION": "0"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout == "False False\n"


@pytest.mark.usefixtures("detection_on")
def test_none_and_empty_tensors_are_accepted_and_register_nothing() -> None:
    detect.maybe_detect_nan(None, "a")
    detect.maybe_detect_inf(torch.empty(0, 3), "b")
    detect.maybe_detect_oob(None, 0, 1, "c")
    detect.maybe_detect_oob(torch.empty(0, dtype=torch.int64), 0, 1, "d")
    assert witness.witness_tables().slots == {}
    detect.check()


@pytest.mark.usefixtures("detection_on")
def test_nan_probe_records_count_lowest_index_phase_step_order_and_rows() -> None:
    detect.set_step(3)
    with detect.phase("capture-warmup"):
        detect.maybe_detect_nan(_nan_at(7, 2, 9), "attn.out")
    assert detect.report().hits == (
        SiteHit(
            kind="nan",
            site="attn.out",
            device="cpu",
            count=3,
            lowest_index=2,
            phase="capture-warmup",
            step=3,
            min_value=witness.INT64_MAX,
            max_value=witness.INT64_MIN,
            order=0,
            first_row=2,
            last_row=9,
        ),
    )


@pytest.mark.usefixtures("detection_on")
def test_rows_are_counted_along_dim_0_and_widen_over_later_hits() -> None:
    t = torch.zeros(4, 3, 2)
    t[1, 2, 0] = float("nan")
    detect.maybe_detect_nan(t, "x")
    (hit,) = detect.report().hits
    assert (hit.first_row, hit.last_row, hit.lowest_index) == (1, 1, 10)
    t[3, 0, 1] = float("nan")
    detect.maybe_detect_nan(t, "x")
    (hit,) = detect.report().hits
    assert (hit.first_row, hit.last_row, hit.count) == (1, 3, 3)


@pytest.mark.usefixtures("detection_on")
def test_first_hit_order_follows_execution_not_site_registration() -> None:
    clean = torch.zeros(2)
    for site in ("a", "b", "c"):
        detect.maybe_detect_nan(clean, site)
    detect.maybe_detect_nan(_nan_at(0), "c")
    detect.maybe_detect_nan(_nan_at(0), "a")
    detect.maybe_detect_nan(_nan_at(0), "c")
    assert [(hit.site, hit.order) for hit in detect.report().hits] == [("c", 0), ("a", 1)]


def test_sglang_call_sites_work_with_its_names_switches_and_signatures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_ENABLE_ASYNC_ASSERT", "1")
    params = {
        name: list(inspect.signature(getattr(detect, name)).parameters)
        for name in ("maybe_detect_nan", "maybe_detect_inf", "maybe_detect_oob")
    }
    assert params == {
        "maybe_detect_nan": ["tensor", "msg", "provider"],
        "maybe_detect_inf": ["tensor", "msg", "provider"],
        "maybe_detect_oob": ["indices", "low", "high", "msg", "provider"],
    }
    detect.maybe_detect_nan(tensor=_nan_at(3), msg="logits")
    detect.maybe_detect_oob(torch.tensor([0, 9]), 0, 8, msg="req_to_token")
    assert [hit.site for hit in detect.report().hits] == ["logits", "req_to_token"]


@pytest.mark.usefixtures("detection_on")
def test_an_empty_msg_names_the_calling_module_and_line() -> None:
    detect.maybe_detect_nan(_nan_at(0))
    line = sys._getframe().f_lineno - 1
    (hit,) = detect.report().hits
    assert hit.site == f"{__name__}:{line}"


@pytest.mark.usefixtures("detection_on")
def test_record_float_tensors_orders_first_hits_as_listed_within_one_launch() -> None:
    detect.record_float_tensors(
        [("late", _nan_at(1)), ("clean", torch.zeros(3)), ("early", _nan_at(2, 4))]
    )
    hits = detect.report().hits
    assert [(hit.site, hit.order, hit.count) for hit in hits] == [("late", 0, 1), ("early", 1, 2)]


@pytest.mark.usefixtures("detection_on")
def test_later_hits_add_counts_and_lower_the_index_but_keep_the_first_phase_and_step() -> None:
    detect.maybe_detect_nan(_nan_at(5), "x")
    detect.set_step(8)
    with detect.phase("replay"):
        detect.maybe_detect_nan(_nan_at(1, 2), "x")
    (hit,) = detect.report().hits
    assert isinstance(hit, SiteHit)
    assert (hit.count, hit.lowest_index, hit.phase, hit.step) == (3, 1, "eager", 0)


@pytest.mark.usefixtures("detection_on")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_nan_and_inf_probes_handle_every_float_dtype(dtype: torch.dtype) -> None:
    t = torch.tensor([0.0, float("-inf"), float("nan"), float("inf")], dtype=dtype)
    detect.maybe_detect_nan(t, "n")
    detect.maybe_detect_inf(t, "i")
    assert detect.report().message() == (
        "2 sites hit, in first-hit order: nan at n: 1 element in row 2, first hit in phase "
        "eager at step 0, lowest flat index 2; inf at i: 2 elements in rows 1..3 (+inf and "
        "-inf), first hit in phase eager at step 0, lowest flat index 1"
    )


@pytest.mark.usefixtures("detection_on")
def test_flat_index_is_row_major_for_non_contiguous_tensors() -> None:
    t = torch.zeros(4, 3).t()  # shape (3, 4), not contiguous
    t[2, 1] = float("nan")
    detect.maybe_detect_nan(t, "x")
    (hit,) = detect.report().hits
    assert isinstance(hit, SiteHit)
    assert hit.lowest_index == 2 * 4 + 1


@pytest.mark.usefixtures("detection_on")
def test_integer_and_bool_tensors_cannot_hold_nan_and_are_skipped() -> None:
    detect.maybe_detect_nan(torch.tensor([1, 2]), "ints")
    detect.maybe_detect_inf(torch.tensor([True]), "bools")
    assert witness.witness_tables().slots == {}


@pytest.mark.usefixtures("detection_on")
def test_complex_tensors_are_refused_with_a_way_out() -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.maybe_detect_nan(torch.zeros(2, dtype=torch.complex64), "c")
    assert str(excinfo.value) == (
        "maybe_detect_nan('c'): complex tensors are not supported, got torch.complex64; "
        "probe torch.view_as_real(t) instead"
    )


@pytest.mark.usefixtures("detection_on")
def test_a_non_tensor_is_refused() -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.maybe_detect_nan([1.0], "lst")  # type: ignore[arg-type]
    assert str(excinfo.value) == "probe 'lst': tensor must be a torch.Tensor or None, got list"


@pytest.mark.usefixtures("detection_on")
def test_oob_probe_is_half_open_and_records_values_and_bounds() -> None:
    detect.maybe_detect_oob(torch.tensor([[0, 4], [5, -1]], dtype=torch.int32), 0, 5, "kv.idx")
    assert detect.report().message() == (
        "1 site hit: oob at kv.idx: 2 elements in row 1, values -1..5 outside [0, 5), first "
        "hit in phase eager at step 0, lowest flat index 2"
    )


@pytest.mark.usefixtures("detection_on")
def test_oob_bounds_may_be_one_element_tensors_read_when_the_probe_runs() -> None:
    high = torch.tensor([3], dtype=torch.int32)
    indices = torch.tensor([0, 1, 2], dtype=torch.int64)
    detect.maybe_detect_oob(indices, torch.tensor(0), high, "seq")
    high.fill_(2)
    detect.maybe_detect_oob(indices, torch.tensor(0), high, "seq")
    assert detect.report().message() == (
        "1 site hit: oob at seq: 1 element in row 2, value 2 outside [0, 2), first hit in "
        "phase eager at step 0, lowest flat index 2"
    )


@pytest.mark.usefixtures("detection_on")
@pytest.mark.parametrize(
    ("bound", "message"),
    [
        (
            torch.tensor([1, 2]),
            "low tensor must hold exactly one integer, got shape (2,) dtype torch.int64",
        ),
        (
            torch.tensor(1.0),
            "low tensor must hold exactly one integer, got shape () dtype torch.float32",
        ),
        (
            torch.tensor(1, device="meta"),
            "low is on meta but indices are on cpu; keep the bound on the same device",
        ),
        (1.0, "low must be an int or a 1-element integer tensor, got float"),
        (True, "low must be an int or a 1-element integer tensor, got bool"),
        (2**63, "low=9223372036854775808 is outside int64"),
    ],
)
def test_bad_oob_bounds_are_refused(bound: object, message: str) -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.maybe_detect_oob(torch.tensor([0]), bound, 4, "b")  # type: ignore[arg-type]
    assert str(excinfo.value) == f"maybe_detect_oob('b'): {message}"


@pytest.mark.usefixtures("detection_on")
def test_float_indices_are_refused() -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.maybe_detect_oob(torch.tensor([0.0]), 0, 4, "f")
    assert str(excinfo.value) == (
        "maybe_detect_oob('f'): indices must be an integer tensor, got torch.float32"
    )


@pytest.mark.usefixtures("detection_on")
def test_unknown_provider_lists_the_providers() -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.maybe_detect_nan(_nan_at(1), "x", provider="cuda")
    assert str(excinfo.value) == "unknown probe provider 'cuda': expected one of torch, triton"


@pytest.mark.usefixtures("detection_on")
def test_triton_provider_on_cpu_needs_interpreter_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(DetectUsageError) as excinfo:
        detect.maybe_detect_nan(_nan_at(1), "x", provider="triton")
    assert str(excinfo.value) == (
        "probe provider 'triton' needs a CUDA tensor or TRITON_INTERPRET=1 (set before triton "
        "is imported); got a tensor on cpu"
    )


@pytest.mark.usefixtures("detection_on")
def test_probing_keeps_working_after_a_detection_and_reset() -> None:
    detect.maybe_detect_nan(_nan_at(0), "x")
    with pytest.raises(NaNDetected):
        detect.check()
    detect.maybe_detect_nan(torch.zeros(4), "x")
    detect.reset()
    detect.maybe_detect_nan(torch.zeros(4), "x")
    detect.check()
    detect.maybe_detect_nan(_nan_at(3), "x")
    (hit,) = detect.report().hits
    assert isinstance(hit, SiteHit)
    assert (hit.count, hit.lowest_index) == (1, 3)


def test_prepare_device_allocates_the_table_before_capture() -> None:
    detect.prepare_device("cpu")
    assert list(witness.witness_tables().tables) == ["cpu"]

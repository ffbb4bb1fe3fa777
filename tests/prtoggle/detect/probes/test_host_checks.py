"""Tests of prtoggle.detect.probes.host_checks: Python-int range checks before a launch."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from prtoggle import detect
from prtoggle.detect.probes import witness
from prtoggle.errors import DetectUsageError, OOBDetected

BATCH_SIZE_MESSAGE = (
    "1 site hit: oob at trtllm_mha.context.batch_size: 1 element, value 5 outside [0, 4), "
    "first hit in phase eager at step 0, lowest flat index 0"
)


def test_host_check_is_off_without_oob_detection() -> None:
    detect.maybe_check_host_range(5, 0, 4, "trtllm_mha.context.batch_size")
    assert witness.witness_tables().slots == {}


@pytest.mark.usefixtures("detection_on")
def test_a_value_inside_the_half_open_range_passes_and_records_nothing() -> None:
    detect.maybe_check_host_range(0, 0, 4, "bs")
    detect.maybe_check_host_range(3, 0, 4, "bs")
    detect.maybe_check_host_range(np.int64(2), 0, 4, "bs")  # type: ignore[arg-type]
    assert witness.witness_tables().slots == {}


@pytest.mark.usefixtures("detection_on")
def test_raise_mode_raises_at_once_and_check_reports_it_too() -> None:
    with pytest.raises(OOBDetected) as excinfo:
        detect.maybe_check_host_range(5, 0, 4, "trtllm_mha.context.batch_size")
    assert str(excinfo.value) == BATCH_SIZE_MESSAGE
    assert excinfo.value.sites == ("trtllm_mha.context.batch_size",)
    with pytest.raises(OOBDetected) as again:
        detect.check()
    assert str(again.value) == BATCH_SIZE_MESSAGE


@pytest.mark.usefixtures("detection_on")
def test_repeated_hits_accumulate_with_the_first_phase_step_and_bounds() -> None:
    detect.set_mode("record")
    detect.maybe_check_host_range(-2, 0, 4, "len")
    detect.set_step(6)
    with detect.phase("replay"):
        detect.maybe_check_host_range(9, 1, 8, "len")
    detect.set_mode("raise")
    with pytest.raises(OOBDetected) as excinfo:
        detect.maybe_check_host_range(4, 0, 4, "len")
    assert str(excinfo.value) == (
        "1 site hit: oob at len: 3 elements, values -2..9 outside [0, 4), first hit in phase "
        "eager at step 0, lowest flat index 0"
    )


@pytest.mark.usefixtures("detection_on")
def test_warn_mode_records_without_raising_and_check_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    detect.set_mode("warn")
    detect.maybe_check_host_range(5, 0, 4, "trtllm_mha.context.batch_size")
    with caplog.at_level(logging.WARNING, logger="prtoggle.detect.findings.checking"):
        detect.check()
    assert caplog.messages == [f"OOBDetected: {BATCH_SIZE_MESSAGE}"]


@pytest.mark.usefixtures("detection_on")
def test_host_hits_share_the_row_of_a_cpu_range_probe_with_the_same_site() -> None:
    detect.set_mode("record")
    detect.maybe_detect_oob(torch.tensor([0, 7]), 0, 4, "idx")
    detect.maybe_check_host_range(-1, 0, 4, "idx")
    assert detect.report().message() == (
        "1 site hit: oob at idx: 2 elements in row 1, values -1..7 outside [0, 4), first hit "
        "in phase eager at step 0, lowest flat index 0"
    )


@pytest.mark.usefixtures("detection_on")
@pytest.mark.parametrize(
    ("value", "low", "high", "name", "type_name"),
    [
        (torch.tensor(3), 0, 4, "value", "Tensor"),
        (1.0, 0, 4, "value", "float"),
        (1, True, 4, "low", "bool"),
        (1, 0, "4", "high", "str"),
    ],
)
def test_non_integers_are_refused_and_tensors_pointed_to_the_device_probe(
    value: object, low: object, high: object, name: str, type_name: str
) -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.maybe_check_host_range(value, low, high, "s")  # type: ignore[arg-type]
    assert str(excinfo.value) == (
        f"maybe_check_host_range('s'): {name} must be a Python int, got {type_name}; "
        f"use maybe_detect_oob() for tensors"
    )

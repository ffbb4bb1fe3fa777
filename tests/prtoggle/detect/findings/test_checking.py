"""Tests of prtoggle.detect.findings.checking: check(), report(), reset() and the three modes."""

from __future__ import annotations

import logging

import pytest
import torch

from prtoggle import detect
from prtoggle.detect import config
from prtoggle.detect.probes import witness
from prtoggle.errors import DetectUsageError, NaNDetected, OOBDetected, RedzoneViolation

NAN_AND_OOB = (
    "2 sites hit, in first-hit order: nan at attn.out: 1 element in row 0, first hit in phase "
    "eager at step 0, lowest flat index 0; oob at kv.idx: 1 element in row 1, value 9 outside "
    "[0, 8), first hit in phase eager at step 0, lowest flat index 1"
)


def _hit_nan_and_oob() -> None:
    detect.maybe_detect_nan(torch.tensor([float("nan"), 1.0]), "attn.out")
    detect.maybe_detect_oob(torch.tensor([0, 9]), 0, 8, "kv.idx")


def test_check_is_clean_before_any_probe() -> None:
    detect.check()
    assert detect.report().clean


@pytest.mark.usefixtures("detection_on")
def test_check_raises_the_most_severe_kind_naming_every_site_first_writer_first() -> None:
    _hit_nan_and_oob()
    with pytest.raises(OOBDetected) as excinfo:
        detect.check()
    assert str(excinfo.value) == NAN_AND_OOB
    assert excinfo.value.sites == ("attn.out", "kv.idx")
    assert excinfo.value.first is excinfo.value.hits[0]
    assert (excinfo.value.first.site, excinfo.value.first.order) == ("attn.out", 0)


@pytest.mark.usefixtures("detection_on")
def test_hits_stay_until_reset_then_the_process_goes_on_clean() -> None:
    detect.maybe_detect_nan(torch.tensor([float("nan")]), "attn.out")
    with pytest.raises(NaNDetected):
        detect.check()
    detect.maybe_detect_nan(torch.tensor([float("nan")]), "attn.out")
    with pytest.raises(NaNDetected) as excinfo:
        detect.check()
    assert str(excinfo.value) == (
        "1 site hit: nan at attn.out: 2 elements in row 0, first hit in phase eager at step 0, "
        "lowest flat index 0"
    )
    detect.reset()
    detect.check()
    detect.maybe_detect_nan(torch.ones(3), "attn.out")
    detect.check()


@pytest.mark.usefixtures("detection_on")
def test_warn_mode_logs_one_warning_per_check_and_does_not_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    detect.set_mode("warn")
    _hit_nan_and_oob()
    with caplog.at_level(logging.WARNING, logger="prtoggle.detect.findings.checking"):
        detect.check()
    assert caplog.messages == [f"OOBDetected: {NAN_AND_OOB}"]


@pytest.mark.usefixtures("detection_on")
def test_record_mode_keeps_the_hits_for_report(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.MODE_ENV, "record")
    _hit_nan_and_oob()
    detect.check()
    report = detect.report()
    assert report.message() == NAN_AND_OOB
    assert [hit.kind for hit in report.hits] == ["nan", "oob"]


def test_a_bad_mode_fails_check_even_when_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.MODE_ENV, "quiet")
    with pytest.raises(DetectUsageError) as excinfo:
        detect.check()
    assert str(excinfo.value) == (
        "PRTOGGLE_DETECT_MODE: unknown detection mode 'quiet': expected one of raise, warn, record"
    )


@pytest.mark.usefixtures("detection_on")
def test_check_is_refused_during_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    detect.maybe_detect_nan(torch.ones(2), "x")
    monkeypatch.setattr(witness, "is_capturing", lambda: True)
    with pytest.raises(DetectUsageError) as excinfo:
        detect.check()
    assert str(excinfo.value) == (
        "check()/report() called during CUDA graph capture: call it after capture or replay"
    )


@pytest.mark.usefixtures("detection_on")
def test_each_device_is_read_with_one_device_to_host_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(config.POISON_ENV, "1")
    buffer = detect.poisoned_buffer(4, dtype=torch.int32, device="cpu", name="buf")
    _hit_nan_and_oob()
    copies = []
    original_cpu = torch.Tensor.cpu

    def counting_cpu(self: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        copies.append(self.numel())
        return original_cpu(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch.Tensor, "cpu", counting_cpu)
    detect.report()
    assert copies == [witness.MAX_SITES * witness.NUM_COLUMNS + 2]
    assert buffer.numel() == 4


@pytest.mark.usefixtures("detection_on")
def test_redzone_violation_outranks_every_probe_kind_and_is_listed_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(config.POISON_ENV, "1")
    buffer = detect.poisoned_buffer(2, dtype=torch.int64, device="cpu", name="pool")
    torch.empty(0, dtype=torch.int64).set_(buffer.untyped_storage(), 0, (3,), (1,))[2] = 0
    _hit_nan_and_oob()
    with pytest.raises(RedzoneViolation) as excinfo:
        detect.check()
    assert str(excinfo.value) == (
        NAN_AND_OOB.replace("2 sites", "3 sites") + "; redzone of buffer pool: 8 bytes "
        "overwritten, first at byte 0 past its end (16-byte buffer on cpu)"
    )
    assert excinfo.value.sites == ("attn.out", "kv.idx", "pool")

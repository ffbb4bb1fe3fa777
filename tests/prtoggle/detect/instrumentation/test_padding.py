"""Tests of detect.instrumentation.padding: the first output whose real rows read the padding."""

from __future__ import annotations

import math

import pytest
import torch

from prtoggle import detect
from prtoggle.errors import DetectUsageError, PaddingLeakDetected


class RowWise(torch.nn.Module):
    """Per-row work: padding rows never reach real rows."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class Leaky(torch.nn.Module):
    """Mixes rows after a per-row projection: a mean over every row, padding included."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = RowWise()
        self.mix = torch.nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        return self.mix(h - h.mean(dim=0, keepdim=True))


def _runner(model: torch.nn.Module, real: torch.Tensor) -> object:
    def run(variant: detect.PaddingVariant) -> None:
        rows = variant.padded_rows or 5
        x = torch.full((rows, 4), variant.fill)
        x[: real.shape[0]] = real
        model(x)

    return run


def test_row_wise_model_is_padding_invariant() -> None:
    model = RowWise()
    real = torch.randn(3, 4)
    assert detect.compare_padding(_runner(model, real), model, real_rows=3) is None
    detect.check_padding_invariance(_runner(model, real), model, real_rows=3)


def test_the_first_site_mixing_padding_into_real_rows_is_named() -> None:
    model = Leaky()
    real = torch.randn(3, 4)
    with pytest.raises(PaddingLeakDetected) as excinfo:
        detect.check_padding_invariance(_runner(model, real), model, real_rows=3)
    assert str(excinfo.value) == (
        "padding leaks into real rows: first at model.mix (call 0): rows 0..2 differ between "
        "padding zero and nan (12 elements, max |diff| nan)"
    )
    assert excinfo.value.sites == ("model.mix",)
    assert excinfo.value.first.site == "model.mix"


def test_padding_to_two_sizes_is_compared_on_the_real_rows() -> None:
    model = Leaky()
    real = torch.randn(2, 4)
    variants = [detect.PaddingVariant("pad4", 0.0, 4), detect.PaddingVariant("pad8", 0.0, 8)]
    found = detect.compare_padding(_runner(model, real), model, real_rows=2, variants=variants)
    assert found is not None
    assert (found.site, found.baseline, found.variant) == ("model.mix", "pad4", "pad8")
    invariant = RowWise()
    assert (
        detect.compare_padding(
            _runner(invariant, real), invariant, real_rows=2, variants=variants, atol=1e-6
        )
        is None
    )


def test_recording_keeps_real_rows_per_call_and_removes_its_hooks() -> None:
    model = RowWise()
    recording = detect.record_outputs(
        lambda: (model(torch.zeros(5, 4)), model(torch.ones(1, 4))), model, real_rows=2
    )
    assert [(site, call, tuple(t.shape)) for site, call, t in recording.outputs] == [
        ("model.proj", 0, (2, 4)),
        ("model", 0, (2, 4)),
        ("model.proj", 1, (1, 4)),
        ("model", 1, (1, 4)),
    ]
    assert all(not m._forward_hooks for m in model.modules())


def test_one_variant_is_not_a_comparison() -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.compare_padding(
            lambda v: None, RowWise(), real_rows=1, variants=[detect.PaddingVariant("a", 0.0)]
        )
    assert str(excinfo.value) == ("compare_padding(): needs at least two padding variants, got 1")
    assert math.isnan(detect.DEFAULT_VARIANTS[1].fill)

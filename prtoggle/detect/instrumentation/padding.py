"""Padding invariance: run one forward with its padding filled differently, find the first leak.

    def run(variant: detect.PaddingVariant) -> None:
        batch = build_batch(pad_rows_with=variant.fill)   # inputs and graph buffers
        model(batch)

    detect.check_padding_invariance(run, model, real_rows=3)  # raises PaddingLeakDetected

The caller owns its buffers, so `run(variant)` fills the padding rows of its inputs and
graph buffers with `variant.fill` (and, for `padded_rows`, pads to that many rows) and runs
the forward once. Meanwhile every submodule output (as detect.instrument() names them) is
recorded: a host copy of its real rows, rows [0, real_rows) along dim 0 (outputs with fewer
rows are kept whole). The runs are compared output by output in execution order against the
first variant: the first site whose real rows differ (bitwise, NaN equal to NaN, unless a
tolerance is given: padded to two sizes, kernels may tile differently) is where padding
leaks into real rows. Recording copies every output to the host: a debugging pass, run
eagerly (the graph runner's static buffers are filled by `run` like any input).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from prtoggle.detect.instrumentation.modules import named_tensors
from prtoggle.errors import DetectUsageError, PaddingLeakDetected

if TYPE_CHECKING:
    import torch
    from torch.utils.hooks import RemovableHandle

LARGE_FILL = 1.0e4


@dataclass(frozen=True)
class PaddingVariant:
    """How `run` fills the padding: a value (float padding; integer buffers choose their
    own out-of-range value for a non-zero fill) and optionally the padded row count."""

    name: str
    fill: float
    padded_rows: int | None = None


DEFAULT_VARIANTS = (
    PaddingVariant("zero", 0.0),
    PaddingVariant("nan", math.nan),
    PaddingVariant("large", LARGE_FILL),
)


@dataclass(frozen=True)
class PaddingDivergence:
    """The first output whose real rows differ between two variants."""

    site: str
    call: int  # 0 for the site's first output in the forward, 1 for its second, ...
    baseline: str
    variant: str
    first_row: int | None
    last_row: int | None
    detail: str

    def message(self) -> str:
        """One line naming the site, the rows and the two variants."""
        rows = "" if self.first_row is None else f" rows {self.first_row}..{self.last_row}"
        return (
            f"padding leaks into real rows: first at {self.site} (call {self.call}):{rows} "
            f"differ between padding {self.baseline} and {self.variant} ({self.detail})"
        )


@dataclass
class OutputRecording:
    """The real rows of every submodule output of one forward, in execution order."""

    real_rows: int
    outputs: list[tuple[str, int, torch.Tensor]] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)

    def add(self, site: str, tensor: torch.Tensor) -> None:
        """Keep a host copy of the real rows of `tensor` under (site, call number)."""
        call = self.calls.get(site, 0)
        self.calls[site] = call + 1
        real = tensor.detach()
        if real.dim() > 0 and real.shape[0] > self.real_rows:
            real = real[: self.real_rows]
        self.outputs.append((site, call, real.to("cpu", copy=True)))


def record_outputs(
    run: Callable[[], object], module: torch.nn.Module, *, name: str = "model", real_rows: int
) -> OutputRecording:
    """Run `run()` once with hooks recording the real rows of every submodule output."""
    recording = OutputRecording(real_rows=real_rows)
    hooks: list[RemovableHandle] = []
    try:
        for path, submodule in module.named_modules():
            hooks.append(submodule.register_forward_hook(_recorder(recording, name, path)))
        run()
    finally:
        for hook in hooks:
            hook.remove()
    return recording


def compare_padding(
    run: Callable[[PaddingVariant], object],
    module: torch.nn.Module,
    *,
    real_rows: int,
    name: str = "model",
    variants: Sequence[PaddingVariant] = DEFAULT_VARIANTS,
    atol: float = 0.0,
    rtol: float = 0.0,
) -> PaddingDivergence | None:
    """Run once per variant; the first divergence from the first variant, or None."""
    if len(variants) < 2:
        raise DetectUsageError(
            f"compare_padding(): needs at least two padding variants, got {len(variants)}"
        )
    if isinstance(real_rows, bool) or not isinstance(real_rows, int) or real_rows < 0:
        raise DetectUsageError(
            f"compare_padding(): real_rows must be an int >= 0, got {real_rows!r}"
        )
    recordings = [
        record_outputs(partial(run, variant), module, name=name, real_rows=real_rows)
        for variant in variants
    ]
    for variant, recording in zip(variants[1:], recordings[1:], strict=True):
        found = first_divergence(recordings[0], recording, atol=atol, rtol=rtol)
        if found is not None:
            site, call, first_row, last_row, detail = found
            return PaddingDivergence(
                site, call, variants[0].name, variant.name, first_row, last_row, detail
            )
    return None


def check_padding_invariance(
    run: Callable[[PaddingVariant], object],
    module: torch.nn.Module,
    *,
    real_rows: int,
    **options: Any,
) -> None:
    """compare_padding() (same options), raising PaddingLeakDetected naming the first
    leaking site."""
    found = compare_padding(run, module, real_rows=real_rows, **options)
    if found is not None:
        raise PaddingLeakDetected(found.message(), sites=(found.site,), hits=(found,))


def first_divergence(
    baseline: OutputRecording, other: OutputRecording, *, atol: float = 0.0, rtol: float = 0.0
) -> tuple[str, int, int | None, int | None, str] | None:
    """(site, call, first_row, last_row, detail) of the first output that differs, or None."""
    import torch

    for index, (site, call, expected) in enumerate(baseline.outputs):
        if index >= len(other.outputs) or other.outputs[index][:2] != (site, call):
            return site, call, None, None, "the other run did not produce this output next"
        actual = other.outputs[index][2]
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            detail = f"shape {tuple(expected.shape)} vs {tuple(actual.shape)}"
            return site, call, None, None, detail
        same = torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
        if not bool(same.all()):
            return (site, call, *_rows_and_detail(expected, actual, same))
    return None


def _rows_and_detail(
    expected: torch.Tensor, actual: torch.Tensor, same: torch.Tensor
) -> tuple[int | None, int | None, str]:
    """The differing rows along dim 0 and a short description of the difference."""
    import torch

    differ = ~same
    count = int(differ.sum())
    gap = (expected.double() - actual.double()).abs()[differ]
    worst = "nan" if bool(gap.isnan().any()) else f"{float(gap.max()):.4g}"
    detail = f"{count} elements, max |diff| {worst}"
    if expected.dim() == 0:
        return None, None, detail
    rows = torch.nonzero(differ.reshape(differ.shape[0], -1).any(dim=1)).flatten()
    return int(rows[0]), int(rows[-1]), detail


def _recorder(recording: OutputRecording, name: str, path: str) -> Any:
    """A forward hook adding the module's float outputs to `recording`."""
    site = f"{name}.{path}" if path else name

    def record(module: torch.nn.Module, args: Any, output: Any) -> None:
        for tensor_site, tensor in named_tensors(site, output):
            recording.add(tensor_site, tensor)

    return record

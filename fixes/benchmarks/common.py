"""Shared pieces of the fix-cost benchmarks: options, result, timing, and the `python -m` entry."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

import prtoggle
from prtoggle.errors import PrToggleError
from prtoggle.toggle import active_reverts

__all__ = [
    "BenchOptions",
    "BenchResult",
    "ShapeValue",
    "bench_device",
    "make_result",
    "run_bench_main",
    "shape_of",
    "time_call",
]

ShapeValue = int | float | str | list[int]
"""What a shape entry may hold (JSON-friendly): sizes, dtype names, per-request lists."""

SAMPLE_TARGET_SECONDS = {"cpu": 0.01, "cuda": 0.002}
"""Each sample repeats the timed call until it lasts about this long (short calls average)."""

MAX_CALLS_PER_SAMPLE = 1000

CPU_THREADS = 1
"""torch intra-op threads on CPU: one, so that a busy machine stalls the runs less unevenly."""


@dataclass(frozen=True)
class BenchOptions:
    """How to run a benchmark: device, kernel provider (None: the default), samples."""

    device: str = "cpu"
    provider: str | None = None
    repeat: int = 10
    warmup: int = 2


@dataclass(frozen=True)
class BenchResult:
    """One benchmark's timing: the median and every sample, in `unit` per call."""

    name: str
    timed: str  # the function (and the state) measured
    unit: str
    median: float
    samples: list[float]
    shape: dict[str, ShapeValue]
    calls_per_sample: int = 1
    reverted: list[int] = field(default_factory=list)  # PRs in force in this process
    extras: dict[str, int | float | str] = field(default_factory=dict)
    note: str = ""  # what to expect of the fixed/reverted ratio

    def to_json(self) -> str:
        return json.dumps(asdict(self))  # shape keys keep their order

    def describe(self) -> str:
        shape = ", ".join(f"{key}={value}" for key, value in self.shape.items())
        reverted = ", ".join(str(pr) for pr in self.reverted) or "none"
        return (
            f"{self.name}: median {self.median:.4g} {self.unit} per call over "
            f"{len(self.samples)} samples of {self.calls_per_sample} calls "
            f"(reverted: {reverted})\n  timed: {self.timed}\n  shape: {shape}"
        )


def bench_device(options: BenchOptions) -> torch.device:
    """Apply SGLANG_DEBUG_REVERT_PR (idempotent), check the options, return the device."""
    prtoggle.maybe_revert_pr_fix()
    if options.device not in ("cpu", "cuda"):
        raise PrToggleError(f"benchmark device {options.device!r} is unknown: expected cpu or cuda")
    if options.device == "cuda" and not torch.cuda.is_available():
        raise PrToggleError("benchmark device 'cuda' requested but torch sees no CUDA device; "
                            "use --device cpu")
    if options.repeat < 1 or options.warmup < 0:
        raise PrToggleError(f"benchmark repeat must be >= 1 and warmup >= 0, got repeat "
                            f"{options.repeat} and warmup {options.warmup}")
    return torch.device(options.device)


def time_call(
    call: Callable[[], object], *, device: torch.device, options: BenchOptions
) -> tuple[list[float], int]:
    """Milliseconds per call for `options.repeat` samples, and the calls in each sample.

    Warm-up calls first; then the number of calls per sample is chosen so that a sample
    lasts about SAMPLE_TARGET_SECONDS. CUDA: events around each sample; CPU: perf_counter.
    """
    for _ in range(options.warmup):
        call()
    first = _seconds(call, device=device, calls=1)
    target = SAMPLE_TARGET_SECONDS[device.type]
    calls = max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(target / max(first, 1e-9))))
    samples = [
        1000.0 * _seconds(call, device=device, calls=calls) / calls
        for _ in range(options.repeat)
    ]
    return samples, calls


def make_result(
    *,
    name: str,
    timed: str,
    samples: list[float],
    calls_per_sample: int,
    shape: dict[str, ShapeValue],
    extras: dict[str, int | float | str] | None = None,
    note: str = "",
) -> BenchResult:
    """A result in milliseconds, recording which PRs this process has reverted."""
    return BenchResult(
        name=name, timed=timed, unit="ms", median=statistics.median(samples),
        samples=[round(s, 6) for s in samples], shape=shape,
        calls_per_sample=calls_per_sample, reverted=list(active_reverts()),
        extras=dict(extras or {}), note=note,
    )


def run_bench_main(measure: Callable[[BenchOptions], BenchResult], *, description: str) -> None:
    """Parse `--device/--provider/--repeat/--json`, measure, print; exit 1 on an error.

    On CPU the process uses CPU_THREADS torch threads (set here, not in `measure`).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--provider", default=None,
                        help="kernel provider; default: torch on CPU, triton on CUDA")
    parser.add_argument("--repeat", type=int, default=BenchOptions.repeat,
                        help="timed samples (the median is reported)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (name, timed, unit, median, samples, shape)")
    args = parser.parse_args()
    options = BenchOptions(device=args.device, provider=args.provider, repeat=args.repeat)
    if options.device == "cpu":
        torch.set_num_threads(CPU_THREADS)
    try:
        result = measure(options)
    except Exception as exc:  # reported on stderr: the traceback, then `Type: message` last
        traceback.print_exc(file=sys.stderr)
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        sys.exit(1)
    sys.stdout.write((result.to_json() if args.json else result.describe()) + "\n")


def shape_of(**values: Any) -> dict[str, ShapeValue]:
    """A shape record: torch dtypes become their short names."""
    return {key: str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else value
            for key, value in values.items()}


def _seconds(call: Callable[[], object], *, device: torch.device, calls: int) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(calls):
            call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return time.perf_counter() - started

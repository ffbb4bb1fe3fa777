"""Shared pieces of the fix-cost benchmarks: options, result, paired timing, `python -m` entry."""

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
from fixes.errors import EngineUsageError
from prtoggle.revert.toggle import active_reverts, patched_targets

__all__ = [
    "BenchOptions",
    "BenchResult",
    "PairedTiming",
    "RevertedTiming",
    "ShapeValue",
    "bench_device",
    "make_result",
    "run_bench_main",
    "shape_of",
    "time_pair",
    "torch_or_triton_provider",
]

ShapeValue = int | float | str | list[int]
"""What a shape entry may hold (JSON-friendly): sizes, dtype names, per-request lists."""

SAMPLE_TARGET_SECONDS = {"cpu": 0.01, "cuda": 0.002}
"""Each sample repeats the timed call until it lasts about this long (short calls average)."""

MAX_CALLS_PER_SAMPLE = 1000

SETTLE_CALLS = 8
"""Untimed calls before each sample (at most the sample's calls), either variant: a revert
compiles a fresh code object each time, which CPython must re-warm (specialise) before it
runs at speed; the fixed variant gets the same, and the device is busy when timing starts."""

CPU_THREADS = 1
"""torch intra-op threads on CPU: one, so that a busy machine stalls the runs less unevenly."""


@dataclass(frozen=True)
class BenchOptions:
    """How to run a benchmark: device, kernel provider (None: the default), samples.

    With `pr` set, every fixed sample is paired with one taken under `prtoggle.reverted(pr)`.
    """

    device: str = "cpu"
    provider: str | None = None
    repeat: int = 10
    warmup: int = 2
    pr: int | None = None


@dataclass(frozen=True)
class PairedTiming:
    """Interleaved samples (ms per call): fixed[i] and reverted[i] were taken side by side."""

    calls_per_sample: int
    fixed: list[float]
    reverted: list[float] = field(default_factory=list)
    reverted_in_force: list[int] = field(default_factory=list)  # in force for every reverted
    reverted_error: str | None = None  # `Type: message` of the first reverted call that raised


@dataclass(frozen=True)
class RevertedTiming:
    """The reverted half of a paired benchmark: samples[i] was taken beside the fixed [i]."""

    pr: int  # the PR toggled between samples
    samples: list[float]
    in_force: list[int]  # PRs in force for every reverted sample (expected: [pr])
    error: str | None = None  # `Type: message` of the first reverted call that raised
    extras: dict[str, int | float | str] = field(default_factory=dict)


@dataclass(frozen=True)
class BenchResult:
    """One benchmark's timing: fixed median and samples; with a PR, the paired reverted half.

    Its JSON (`to_json`) is the wire format prtoggle.commands.bench reads: the keys are
    prtoggle.protocol.BENCH_RESULT_KEYS, `reverted` an object (BENCH_REVERTED_KEYS) or null.
    """

    name: str
    timed: str  # the function (and the state) measured
    unit: str
    median: float
    samples: list[float]
    shape: dict[str, ShapeValue]
    calls_per_sample: int = 1
    in_force: list[int] = field(default_factory=list)  # PRs in force in this process
    extras: dict[str, int | float | str] = field(default_factory=dict)
    note: str = ""  # what to expect of the fixed/reverted ratio
    reverted: RevertedTiming | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))  # shape keys keep their order

    def describe(self) -> str:
        shape = ", ".join(f"{key}={value}" for key, value in self.shape.items())
        in_force = ", ".join(str(pr) for pr in self.in_force) or "none"
        text = (
            f"{self.name}: median {self.median:.4g} {self.unit} per call over "
            f"{len(self.samples)} samples of {self.calls_per_sample} calls "
            f"(reverted: {in_force})\n  timed: {self.timed}\n  shape: {shape}"
        )
        reverted = self.reverted
        if reverted is None:
            return text
        if reverted.error is not None:
            return f"{text}\n  PR {reverted.pr} reverted: failed: {reverted.error}"
        return (
            f"{text}\n  PR {reverted.pr} reverted, interleaved: median "
            f"{statistics.median(reverted.samples):.4g} {self.unit} per call"
        )


def bench_device(options: BenchOptions) -> torch.device:
    """Apply SGLANG_DEBUG_REVERT_PR (idempotent), check the options, return the device."""
    prtoggle.maybe_revert_pr_fix()
    if options.device not in ("cpu", "cuda"):
        raise EngineUsageError(
            f"benchmark device {options.device!r} is unknown: expected cpu or cuda"
        )
    if options.device == "cuda" and not torch.cuda.is_available():
        raise EngineUsageError(
            "benchmark device 'cuda' requested but torch sees no CUDA device; use --device cpu"
        )
    if options.repeat < 1 or options.warmup < 0:
        raise EngineUsageError(
            f"benchmark repeat must be >= 1 and warmup >= 0, got repeat "
            f"{options.repeat} and warmup {options.warmup}"
        )
    return torch.device(options.device)


def torch_or_triton_provider(options: BenchOptions, *, bench: str, note: str = "") -> str:
    """`options.provider` checked to be torch or triton; None = torch on CPU, triton on CUDA.
    `note` follows the expected choices in the error (e.g. what the provider drives)."""
    if options.provider is None:
        return "torch" if options.device == "cpu" else "triton"
    if options.provider not in ("torch", "triton"):
        raise EngineUsageError(
            f"{bench}: --provider {options.provider!r} is not supported: "
            f"expected torch or triton{note}"
        )
    return options.provider


def time_pair(
    call: Callable[[], object], *, device: torch.device, options: BenchOptions
) -> PairedTiming:
    """`options.repeat` samples of `call`; with `options.pr`, each paired with a reverted one.

    Both variants are warmed up first (JIT of both code paths); the calls per sample are
    chosen so that a sample lasts about SAMPLE_TARGET_SECONDS, and one untimed sample of
    each variant runs before the timed pairs. Pair i runs fixed then
    reverted for even i, reverted then fixed for odd i (ABBA: drift cancels). The revert
    is applied and undone between samples, outside the timed region. A reverted call that
    raises ends the reverted samples (its error is kept); the fixed samples go on.
    CUDA: events around each sample, synchronised between samples; CPU: perf_counter.
    """
    for _ in range(options.warmup):
        call()
    pairing = _Pairing(pr=options.pr, device=device)
    pairing.warm_up(call, times=options.warmup)
    first = _seconds(call, device=device, calls=1)
    target = SAMPLE_TARGET_SECONDS[device.type]
    calls = max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(target / max(first, 1e-9))))
    _seconds(call, device=device, calls=calls)  # one untimed sample each way: caches, clocks
    pairing.warm_up(call, times=calls)
    fixed: list[float] = []
    for index in range(options.repeat):
        if index % 2 == 1:
            pairing.sample(call, calls=calls)
        fixed.append(1000.0 * _seconds(call, device=device, calls=calls, settle=True) / calls)
        if index % 2 == 0:
            pairing.sample(call, calls=calls)
    return PairedTiming(
        calls_per_sample=calls,
        fixed=fixed,
        reverted=pairing.samples,
        reverted_in_force=pairing.in_force(),
        reverted_error=pairing.error,
    )


def make_result(
    *,
    name: str,
    timed: str,
    timing: PairedTiming,
    shape: dict[str, ShapeValue],
    pr: int | None = None,
    extras: dict[str, int | float | str] | None = None,
    reverted_extras: dict[str, int | float | str] | None = None,
    note: str = "",
) -> BenchResult:
    """A result in milliseconds, recording which PRs this process has reverted (fixed)."""
    reverted = None
    if pr is not None:
        reverted = RevertedTiming(
            pr=pr,
            samples=[round(s, 6) for s in timing.reverted],
            in_force=list(timing.reverted_in_force),
            error=timing.reverted_error,
            extras=dict(reverted_extras or {}),
        )
    return BenchResult(
        name=name,
        timed=timed,
        unit="ms",
        median=statistics.median(timing.fixed),
        samples=[round(s, 6) for s in timing.fixed],
        shape=shape,
        calls_per_sample=timing.calls_per_sample,
        in_force=list(active_reverts()),
        extras=dict(extras or {}),
        note=note,
        reverted=reverted,
    )


def run_bench_main(measure: Callable[[BenchOptions], BenchResult], *, description: str) -> None:
    """Parse `--device/--provider/--repeat/--json`, measure, print; exit 1 on an error.

    On CPU the process uses CPU_THREADS torch threads (set here, not in `measure`).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--provider", default=None, help="kernel provider; default: torch on CPU, triton on CUDA"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=BenchOptions.repeat,
        help="timed samples (the median is reported)",
    )
    parser.add_argument(
        "--pr",
        type=int,
        default=None,
        help="pair each sample with one taken with this PR's fix reverted",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (name, timed, unit, median, samples, shape)",
    )
    args = parser.parse_args()
    options = BenchOptions(
        device=args.device, provider=args.provider, repeat=args.repeat, pr=args.pr
    )
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
    return {
        key: str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else value
        for key, value in values.items()
    }


def _seconds(
    call: Callable[[], object], *, device: torch.device, calls: int, settle: bool = False
) -> float:
    """Seconds for `calls` calls; with `settle`, min(calls, SETTLE_CALLS) untimed ones first."""
    for _ in range(min(calls, SETTLE_CALLS) if settle else 0):
        call()
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


@dataclass
class _Pairing:
    """The reverted half of each pair: samples under `prtoggle.reverted(pr)`, or its error."""

    pr: int | None
    device: torch.device
    samples: list[float] = field(default_factory=list)
    error: str | None = None
    seen_in_force: list[set[int]] = field(default_factory=list)

    def warm_up(self, call: Callable[[], object], *, times: int) -> None:
        """`times` reverted calls under one revert (none if `times` is 0)."""
        if times > 0:
            self._reverted(lambda: [call() for _ in range(times)])

    def sample(self, call: Callable[[], object], *, calls: int) -> None:
        seconds = self._reverted(
            lambda: _seconds(call, device=self.device, calls=calls, settle=True)
        )
        if seconds is not None:
            self.samples.append(1000.0 * seconds / calls)

    def in_force(self) -> list[int]:
        """PRs with patched code during every reverted sample."""
        if not self.seen_in_force:
            return []
        return sorted(set.intersection(*self.seen_in_force))

    def _reverted(self, action: Callable[[], Any]) -> Any:
        if self.pr is None or self.error is not None:
            return None
        try:
            with prtoggle.reverted(self.pr):
                self.seen_in_force.append({pr for pr in active_reverts() if patched_targets(pr)})
                return action()
        except Exception as exc:  # the reverted code path failed: reported, not raised
            self.error = f"{type(exc).__name__}: {exc}"
            return None

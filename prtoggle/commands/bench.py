"""Revert cost: a fix's benchmark timed fixed and reverted, interleaved in one child; the ratio."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from prtoggle.errors import RunnerError
from prtoggle.protocol import (
    BENCH_RESULT_KEYS,
    BENCH_REVERTED_KEYS,
    BOOTSTRAP_FAILURE_PREFIX,
    DETECTION_ENV,
    module_command,
)
from prtoggle.recipes.registry import Recipe
from prtoggle.revert.toggle import child_env
from prtoggle.runners.child_outcome import last_exception
from prtoggle.runners.child_process import CommandRun, run_child
from prtoggle.runners.warm_client import CommandRunner

BenchKind = Literal["ok", "failure", "timeout"]


@dataclass(frozen=True)
class BenchRun:
    """One benchmark child: its parsed JSON result, or why it gave none."""

    module: str
    pr: int  # the PR the child toggled between samples
    kind: BenchKind
    result: Mapping[str, Any] | None
    error: str | None  # `Type: message` of a failure, or the timeout
    run: CommandRun

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "error": self.error,
            "result": dict(self.result) if self.result is not None else None,
            "seconds": round(self.run.seconds, 3),
            "exit_code": self.run.returncode,
        }


@dataclass(frozen=True)
class FixCost:
    """A fix's benchmark timed fixed and reverted, interleaved in one child process.

    `ratio` = median over pairs of reverted sample / fixed sample; `ratio_iqr` its
    interquartile range (how far the pairs disagree: noise, next to the effect).
    """

    pr: int
    module: str
    run: BenchRun

    @property
    def fixed_samples(self) -> list[float]:
        return [float(s) for s in self.run.result["samples"]] if self.run.result else []

    @property
    def reverted_samples(self) -> list[float]:
        if self.run.result is None or self.reverted_error is not None:
            return []
        return [float(s) for s in self.run.result["reverted"]["samples"]]

    @property
    def fixed_median(self) -> float | None:
        return statistics.median(self.fixed_samples) if self.fixed_samples else None

    @property
    def reverted_median(self) -> float | None:
        samples = self.reverted_samples
        return statistics.median(samples) if samples else None

    @property
    def reverted_error(self) -> str | None:
        """Why the reverted variant has no figure: its error, or its revert not in force."""
        result = self.run.result
        if result is None:
            return self.run.error
        reverted = result["reverted"]
        if reverted["error"] is not None:
            return str(reverted["error"])
        if list(reverted["in_force"]) != [self.pr]:
            return (
                f"RevertNotInForce: the child reports PRs {list(reverted['in_force'])}"
                f" in force while timing reverted, expected [{self.pr}]"
            )
        if len(reverted["samples"]) != len(result["samples"]):
            return (
                f"UnpairedSamples: {len(reverted['samples'])} reverted samples for "
                f"{len(result['samples'])} fixed ones; expected one per fixed sample"
            )
        return None

    @property
    def measured(self) -> bool:
        return self.run.kind == "ok" and self.reverted_error is None

    @property
    def pair_ratios(self) -> list[float]:
        """reverted / fixed for each interleaved pair (empty unless both were measured)."""
        if not self.measured:
            return []
        return [
            r / f for f, r in zip(self.fixed_samples, self.reverted_samples, strict=True) if f > 0
        ]

    @property
    def ratio(self) -> float | None:
        """Above 1: the reverted code is slower. Below 1: the fix costs time."""
        ratios = self.pair_ratios
        return statistics.median(ratios) if ratios else None

    @property
    def ratio_iqr(self) -> float | None:
        """Interquartile range of the per-pair ratios (0 for a single pair)."""
        ratios = self.pair_ratios
        if len(ratios) < 2:
            return 0.0 if ratios else None
        first, _, third = statistics.quantiles(ratios, n=4, method="inclusive")
        return third - first

    @property
    def fix_cost_interval(self) -> tuple[float, float] | None:
        """The fix cost (percent) at the per-pair ratios' third and first quartiles: the
        spread of FIX COST. When it crosses zero the headline is within the noise."""
        ratios = self.pair_ratios
        if not ratios:
            return None
        first, third = (
            statistics.quantiles(ratios, n=4, method="inclusive")[::2]
            if len(ratios) > 1
            else (ratios[0], ratios[0])
        )
        if first <= 0:
            return None
        return (1.0 / third - 1.0) * 100.0, (1.0 / first - 1.0) * 100.0

    @property
    def cost_within_noise(self) -> bool:
        """Whether the fix cost's interquartile interval holds zero (cost and saving alike)."""
        interval = self.fix_cost_interval
        return interval is not None and interval[0] <= 0.0 <= interval[1]

    @property
    def fix_cost_percent(self) -> float | None:
        """How much longer the fixed code takes than the reverted code, in percent."""
        ratio = self.ratio
        return None if ratio is None or ratio <= 0 else (1.0 / ratio - 1.0) * 100.0

    def extras_compared(self) -> dict[str, tuple[Any, Any]]:
        """Extra figures (e.g. buffer bytes) both variants report: name -> (fixed, reverted)."""
        result = self.run.result or {}
        fixed = result.get("extras", {})
        reverted = (result.get("reverted") or {}).get("extras", {})
        return {key: (fixed[key], reverted[key]) for key in fixed if key in reverted}

    def to_dict(self) -> dict[str, Any]:
        def rounded(value: float | None, digits: int) -> float | None:
            return round(value, digits) if value is not None else None

        return {
            "pr": self.pr,
            "benchmark": self.module,
            "measured": self.measured,
            "fixed_median": rounded(self.fixed_median, 6),
            "reverted_median": rounded(self.reverted_median, 6),
            "ratio_reverted_over_fixed": rounded(self.ratio, 4),
            "ratio_iqr": rounded(self.ratio_iqr, 4),
            "fix_cost_percent": rounded(self.fix_cost_percent, 2),
            "fix_cost_iqr_percent": (
                None
                if self.fix_cost_interval is None
                else [round(value, 2) for value in self.fix_cost_interval]
            ),
            "fix_cost_within_noise": self.cost_within_noise,
            "reverted_error": self.reverted_error,
            "extras": {
                key: {"fixed": f, "reverted": r} for key, (f, r) in self.extras_compared().items()
            },
            "run": self.run.to_dict(),
        }


def benchmark_argv(
    module: str, *, pr: int, device: str, provider: str | None, repeat: int
) -> list[str]:
    """`python -m <module> --device D [--provider P] --repeat K --pr N --json`."""
    return [
        *module_command(module, device=device, provider=provider),
        "--repeat",
        str(repeat),
        "--pr",
        str(pr),
        "--json",
    ]


def bench_env(*, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a benchmark child: nothing reverted at start-up, detection probes off."""
    env = child_env((), base=base)
    for name in DETECTION_ENV:
        env.pop(name, None)
    return env


def run_bench(
    module: str,
    *,
    pr: int,
    device: str = "cpu",
    provider: str | None = None,
    repeat: int = 10,
    timeout: float | None = None,
    base_env: Mapping[str, str] | None = None,
    runner: CommandRunner = run_child,
) -> BenchRun:
    """Run one benchmark child that interleaves fixed and `pr`-reverted samples; its result.

    `runner` starts the child: `run_child` (a fresh process) or a WarmWorker's `run`.
    """
    argv = benchmark_argv(module, pr=pr, device=device, provider=provider, repeat=repeat)
    run = runner(argv, env=bench_env(base=base_env), timeout=timeout)
    return classify_bench(run, module=module, pr=pr)


def classify_bench(run: CommandRun, *, module: str, pr: int) -> BenchRun:
    """The child's result; a failure, timeout or a revert in force while fixed is a failure."""

    def failed(kind: BenchKind, error: str) -> BenchRun:
        return BenchRun(module=module, pr=pr, kind=kind, result=None, error=error, run=run)

    if run.timed_out:
        return failed(
            "timeout", f"Timeout: no result within {run.timeout:g} s; the child was killed"
        )
    if run.returncode != 0:
        return failed("failure", _failure_text(run))
    result = _parse_result(run.stdout, module=module)
    if result["in_force"]:
        return failed(
            "failure",
            f"RevertInForceWhileFixed: the child reports reverted PRs "
            f"{sorted(result['in_force'])} while timing fixed, expected []",
        )
    toggled = result["reverted"]["pr"]
    if toggled != pr:
        return failed("failure", f"WrongPr: the child toggled PR {toggled}, expected {pr}")
    return BenchRun(module=module, pr=pr, kind="ok", result=result, error=None, run=run)


def measure_fix_cost(
    recipe: Recipe,
    *,
    device: str = "cpu",
    provider: str | None = None,
    repeat: int = 10,
    timeout: float | None = None,
    runner: CommandRunner = run_child,
) -> FixCost:
    """The fix's benchmark in one child: `repeat` fixed/reverted pairs, interleaved (ABBA)."""
    if recipe.bench is None:
        raise RunnerError(f"PR {recipe.pr} has no benchmark (no `bench:` in {recipe.path})")
    options: dict[str, Any] = {"device": device, "provider": provider, "repeat": repeat}
    run = run_bench(recipe.bench, pr=recipe.pr, timeout=timeout, runner=runner, **options)
    return FixCost(pr=recipe.pr, module=recipe.bench, run=run)


def _parse_result(stdout: str, *, module: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise RunnerError(
            f"benchmark {module}: exited 0 but printed nothing; expected one "
            f"JSON object with {', '.join(BENCH_RESULT_KEYS)}"
        )
    try:
        data = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise RunnerError(
            f"benchmark {module}: last output line {lines[-1][:200]!r} is not "
            f"JSON: {exc}; expected one object with {', '.join(BENCH_RESULT_KEYS)}"
        ) from exc
    missing = [key for key in BENCH_RESULT_KEYS if not isinstance(data, dict) or key not in data]
    if missing:
        raise RunnerError(
            f"benchmark {module}: result {lines[-1][:200]!r} lacks "
            f"{', '.join(missing)}; expected keys {', '.join(BENCH_RESULT_KEYS)}"
        )
    reverted = data["reverted"]
    if not isinstance(reverted, dict) or not set(BENCH_REVERTED_KEYS) <= set(reverted):
        raise RunnerError(
            f"benchmark {module}: 'reverted' must be an object with "
            f"{', '.join(BENCH_REVERTED_KEYS)} (the child was given --pr), got {reverted!r}"
        )
    if not _is_number(data["median"]):
        raise RunnerError(f"benchmark {module}: 'median' must be a number, got {data['median']!r}")
    checks = [
        ("in_force", data["in_force"], int, "a list of PR numbers"),
        ("reverted.in_force", reverted["in_force"], int, "a list of PR numbers"),
        ("samples", data["samples"], int | float, "a list of numbers"),
        ("reverted.samples", reverted["samples"], int | float, "a list of numbers"),
    ]
    for name, value, kind, expected in checks:
        if not _is_list_of(value, kind):
            raise RunnerError(f"benchmark {module}: {name!r} must be {expected}, got {value!r}")
    if not isinstance(reverted["pr"], int) or isinstance(reverted["pr"], bool):
        raise RunnerError(
            f"benchmark {module}: 'reverted.pr' must be the PR number toggled, "
            f"got {reverted['pr']!r}"
        )
    if reverted["error"] is not None and not isinstance(reverted["error"], str):
        raise RunnerError(
            f"benchmark {module}: 'reverted.error' must be null or a string, "
            f"got {reverted['error']!r}"
        )
    return data


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_list_of(value: object, kind: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, kind) and not isinstance(item, bool) for item in value
    )


def _failure_text(run: CommandRun) -> str:
    """`Type: message` from the child's stderr: start-up revert failure, exception, signal."""
    for line in run.stderr.splitlines():
        if line.startswith(BOOTSTRAP_FAILURE_PREFIX):
            return line
    error_type, message = last_exception(run.stderr)
    if error_type is not None:
        return f"{error_type}: {message}"
    if run.signal_name is not None:
        return f"{run.signal_name}: killed by {run.signal_name}"
    return f"Crash: exited with status {run.returncode} without a result"

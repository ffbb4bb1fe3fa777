"""Fix cost: time each fix's benchmark fixed and reverted, each in a child process; the ratio."""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from prtoggle.errors import RunnerError
from prtoggle.runner import (
    BOOTSTRAP_FAILURE_PREFIX,
    DETECTION_ENV,
    CommandRun,
    last_exception,
    run_command,
    scenario_command,
)

if TYPE_CHECKING:
    from prtoggle.registry import Fix

BenchKind = Literal["ok", "failure", "timeout"]

RESULT_KEYS = ("name", "timed", "unit", "median", "samples", "shape", "reverted")
"""Keys every benchmark's `--json` object has (fixes/benchmarks/common.py BenchResult)."""


@dataclass(frozen=True)
class BenchRun:
    """One benchmark child: its parsed JSON result, or why it gave none."""

    module: str
    prs: tuple[int, ...]  # the PRs the child was asked to revert
    kind: BenchKind
    result: Mapping[str, Any] | None
    error: str | None  # `Type: message` of a failure, or the timeout
    run: CommandRun

    @property
    def median(self) -> float | None:
        return float(self.result["median"]) if self.result is not None else None

    def describe(self) -> str:
        """A table cell: `1.234 ms`, or the failure."""
        if self.result is not None:
            return f"{self.result['median']:.4g} {self.result['unit']}"
        return "timeout" if self.kind == "timeout" else "FAILED"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "reverted": list(self.prs),
            "error": self.error,
            "result": dict(self.result) if self.result is not None else None,
            "seconds": round(self.run.seconds, 3),
            "exit_code": self.run.returncode,
        }


@dataclass(frozen=True)
class FixCost:
    """A fix's benchmark fixed and reverted; `ratio` = reverted median / fixed median."""

    pr: int
    module: str
    fixed: BenchRun
    reverted: BenchRun

    @property
    def measured(self) -> bool:
        return self.fixed.kind == "ok" and self.reverted.kind == "ok"

    @property
    def ratio(self) -> float | None:
        """Above 1: the reverted code is slower. Below 1: the fix costs time."""
        fixed, reverted = self.fixed.median, self.reverted.median
        if fixed is None or reverted is None or fixed <= 0:
            return None
        return reverted / fixed

    @property
    def fix_cost_percent(self) -> float | None:
        """How much longer the fixed code takes than the reverted code, in percent."""
        ratio = self.ratio
        return None if ratio is None or ratio <= 0 else (1.0 / ratio - 1.0) * 100.0

    def extras_compared(self) -> dict[str, tuple[Any, Any]]:
        """Extra figures (e.g. buffer bytes) both runs report: name -> (fixed, reverted)."""
        fixed = (self.fixed.result or {}).get("extras", {})
        reverted = (self.reverted.result or {}).get("extras", {})
        return {key: (fixed[key], reverted[key]) for key in fixed if key in reverted}

    def to_dict(self) -> dict[str, Any]:
        ratio, cost = self.ratio, self.fix_cost_percent
        return {
            "pr": self.pr,
            "benchmark": self.module,
            "measured": self.measured,
            "ratio_reverted_over_fixed": round(ratio, 4) if ratio is not None else None,
            "fix_cost_percent": round(cost, 2) if cost is not None else None,
            "extras": {key: {"fixed": f, "reverted": r}
                       for key, (f, r) in self.extras_compared().items()},
            "fixed": self.fixed.to_dict(),
            "reverted": self.reverted.to_dict(),
        }


def bench_command(module: str, *, device: str, provider: str | None, repeat: int) -> list[str]:
    """`python -m <module> --device D [--provider P] --repeat K --json`."""
    return [*scenario_command(module, device=device, provider=provider),
            "--repeat", str(repeat), "--json"]


def bench_env(prs: Sequence[int], *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a benchmark child: `prs` reverted at start-up, detection probes off."""
    from prtoggle.toggle import child_env

    env = child_env(tuple(prs), base=base)
    for name in DETECTION_ENV:
        env.pop(name, None)
    return env


def run_bench(
    module: str,
    *,
    prs: Sequence[int] = (),
    device: str = "cpu",
    provider: str | None = None,
    repeat: int = 10,
    timeout: float | None = None,
    base_env: Mapping[str, str] | None = None,
) -> BenchRun:
    """Run one benchmark child with `prs` reverted and read its JSON result."""
    argv = bench_command(module, device=device, provider=provider, repeat=repeat)
    run = run_command(argv, env=bench_env(prs, base=base_env), timeout=timeout)
    return classify_bench(run, module=module, prs=tuple(prs))


def classify_bench(run: CommandRun, *, module: str, prs: tuple[int, ...]) -> BenchRun:
    """The child's result; a failure, timeout or wrong set of reverts is reported as such."""
    def failed(kind: BenchKind, error: str) -> BenchRun:
        return BenchRun(module=module, prs=prs, kind=kind, result=None, error=error, run=run)

    if run.timed_out:
        return failed("timeout", f"Timeout: no result within {run.timeout:g} s; "
                                 "the child was killed")
    if run.returncode != 0:
        return failed("failure", _failure_text(run))
    result = _parse_result(run.stdout, module=module)
    in_force = tuple(sorted(int(pr) for pr in result["reverted"]))
    if in_force != tuple(sorted(prs)):
        return failed("failure", f"RevertNotInForce: the child reports reverted PRs "
                                 f"{list(in_force)}, expected {sorted(prs)}")
    return BenchRun(module=module, prs=prs, kind="ok", result=result, error=None, run=run)


def measure_fix_cost(
    fix: Fix,
    *,
    device: str = "cpu",
    provider: str | None = None,
    repeat: int = 10,
    timeout: float | None = None,
    rounds: int = 1,
    on_done: Callable[[str, BenchRun], None] | None = None,
) -> FixCost:
    """The fix's benchmark fixed, then reverted, one child after the other (never at once).

    With `rounds` > 1 the pair runs that many times, alternating, and each variant's
    samples are pooled (median over all): load that drifts over seconds then hits both.
    `on_done("fixed" | "reverted", run)` is called as each child finishes (progress).
    """
    if fix.bench is None:
        raise RunnerError(f"PR {fix.pr} has no benchmark (no `bench:` in {fix.path})")
    if rounds < 1:
        raise RunnerError(f"rounds must be >= 1, got {rounds}")
    options: dict[str, Any] = {
        "device": device, "provider": provider, "repeat": repeat, "timeout": timeout,
    }
    runs: dict[str, list[BenchRun]] = {"fixed": [], "reverted": []}
    for _ in range(rounds):
        for variant, prs in (("fixed", ()), ("reverted", (fix.pr,))):
            run = run_bench(fix.bench, prs=prs, **options)
            runs[variant].append(run)
            if on_done is not None:
                on_done(variant, run)
    return FixCost(pr=fix.pr, module=fix.bench, fixed=pooled(runs["fixed"]),
                   reverted=pooled(runs["reverted"]))


def pooled(runs: Sequence[BenchRun]) -> BenchRun:
    """One run from several of the same variant: the first failure, or every sample pooled."""
    failures = [run for run in runs if run.kind != "ok"]
    if failures or len(runs) == 1:
        return failures[0] if failures else runs[0]
    samples = [float(s) for run in runs for s in (run.result or {})["samples"]]
    result = dict(runs[0].result or {})
    result.update(samples=samples, median=statistics.median(samples), rounds=len(runs),
                  round_medians=[run.median for run in runs])
    seconds = sum(run.run.seconds for run in runs)
    return dataclasses.replace(runs[-1], result=result,
                               run=dataclasses.replace(runs[-1].run, seconds=seconds))


def _parse_result(stdout: str, *, module: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise RunnerError(f"benchmark {module}: exited 0 but printed nothing; expected one "
                          f"JSON object with {', '.join(RESULT_KEYS)}")
    try:
        data = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise RunnerError(f"benchmark {module}: last output line {lines[-1][:200]!r} is not "
                          f"JSON: {exc}; expected one object with {', '.join(RESULT_KEYS)}"
                          ) from exc
    missing = [key for key in RESULT_KEYS if not isinstance(data, dict) or key not in data]
    if missing:
        raise RunnerError(f"benchmark {module}: result {lines[-1][:200]!r} lacks "
                          f"{', '.join(missing)}; expected keys {', '.join(RESULT_KEYS)}")
    if not isinstance(data["median"], int | float) or isinstance(data["median"], bool):
        raise RunnerError(f"benchmark {module}: 'median' must be a number, got "
                          f"{data['median']!r}")
    reverted = data["reverted"]
    if not isinstance(reverted, list) or not all(isinstance(pr, int) for pr in reverted):
        raise RunnerError(f"benchmark {module}: 'reverted' must be a list of PR numbers, got "
                          f"{reverted!r}")
    return data


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

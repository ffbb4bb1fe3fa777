"""Reproduce a fix's failure: run its scenario fixed and reverted; read the outcome line."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prtoggle.errors import RunnerError
from prtoggle.protocol import DETECTION_ENV, OUTCOME_PREFIX, REVERT_ENV, module_command
from prtoggle.recipes.registry import Recipe
from prtoggle.revert.toggle import child_env
from prtoggle.runners.child_outcome import last_exception
from prtoggle.runners.child_process import CommandRun, run_child
from prtoggle.runners.gpu_leases import CUDA_VISIBLE_DEVICES, GpuLeases, visible_gpus
from prtoggle.runners.pool import run_parallel
from prtoggle.runners.warm_client import CommandRunner

OutcomeKind = Literal["clean", "failure", "crash", "timeout"]
_VARIANTS = ("fixed", "reverted")  # run_repros relies on this order


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario run, as the protocol line (or, without one, the exit status) tells it."""

    kind: OutcomeKind
    error: str | None
    site: str | None
    message: str
    seconds: float
    run: CommandRun

    @property
    def outcome(self) -> Literal["clean", "failure"]:
        return "clean" if self.kind == "clean" else "failure"

    def failure_text(self) -> str:
        """`<error> at <site>: <message>`, the text a fix's `expect` regex is matched against."""
        where = f" at {self.site}" if self.site else ""
        return f"{self.error}{where}: {self.message}"

    def describe(self) -> str:
        """A short cell for a table: `clean`, `NaNDetected at site`, `timeout after 60 s`."""
        if self.kind == "clean":
            return "clean"
        if self.kind == "timeout":
            return f"timeout after {self.run.timeout:g} s"
        where = f" at {self.site}" if self.site else ""
        return f"{self.error}{where}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "kind": self.kind,
            "error": self.error,
            "site": self.site,
            "message": self.message,
            "seconds": round(self.seconds, 3),
            "exit_code": self.run.returncode,
        }


def scenario_env(prs: Sequence[int], *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a scenario child: `prs` reverted (none: nothing), detection on."""
    env = dict(os.environ if base is None else base)
    env.pop(REVERT_ENV, None)
    if prs:
        env = child_env(tuple(prs), base=env)
    env.update(DETECTION_ENV)
    return env


def run_scenario(
    module: str,
    *,
    prs: Sequence[int] = (),
    device: str = "cpu",
    provider: str | None = None,
    timeout: float | None = None,
    base_env: Mapping[str, str] | None = None,
    runner: CommandRunner = run_child,
) -> ScenarioResult:
    """Run a scenario module in a child with `prs` reverted and classify what it reports.

    `runner` starts the child: `run_child` (a fresh process) or a WarmWorker's `run`.
    """
    argv = module_command(module, device=device, provider=provider)
    run = runner(argv, env=scenario_env(prs, base=base_env), timeout=timeout)
    return classify_scenario(run, module=module)


def classify_scenario(run: CommandRun, *, module: str) -> ScenarioResult:
    """The protocol line's outcome, or one read from the exit status and stderr without it."""
    protocol = _protocol_line(run.stderr)
    if protocol is not None:
        return _from_protocol(protocol, run, module=module)
    if run.timed_out:
        return ScenarioResult(
            kind="timeout",
            error="Timeout",
            site=None,
            message=f"no outcome within {run.timeout:g} s; the child was killed",
            seconds=run.seconds,
            run=run,
        )
    error_type, message = last_exception(run.stderr)
    signal_name = run.signal_name
    if signal_name is not None:
        error_type = error_type or signal_name
        message = message or f"killed by {signal_name}"
    return ScenarioResult(
        kind="crash",
        error=error_type or "Crash",
        site=None,
        message=message or f"exited with status {run.returncode} without an outcome line",
        seconds=run.seconds,
        run=run,
    )


@dataclass(frozen=True)
class ReproResult:
    """A fix's scenario run with the fix (must be clean) and reverted (must fail as expected)."""

    pr: int
    module: str
    expect: str | None
    fixed: ScenarioResult
    reverted: ScenarioResult

    @property
    def reverted_matches(self) -> bool:
        """The reverted run failed, and `expect` (if any) matches its failure or its stderr."""
        if self.reverted.kind == "clean":
            return False
        if self.expect is None:
            return True
        pattern = re.compile(self.expect)
        return bool(
            pattern.search(self.reverted.failure_text()) or pattern.search(self.reverted.run.stderr)
        )

    @property
    def reproduced(self) -> bool:
        return self.fixed.kind == "clean" and self.reverted_matches

    def to_dict(self) -> dict[str, Any]:
        return {
            "pr": self.pr,
            "scenario": self.module,
            "expect": self.expect,
            "reproduced": self.reproduced,
            "fixed": self.fixed.to_dict(),
            "reverted": self.reverted.to_dict(),
        }


def repro_fix(
    recipe: Recipe,
    *,
    device: str = "cpu",
    provider: str | None = None,
    timeout: float | None = None,
) -> ReproResult:
    """Run the fix's scenario fixed and reverted, each in its own child with detection on."""
    if recipe.repro is None:
        raise RunnerError(f"PR {recipe.pr} has no repro scenario (no `repro:` in {recipe.path})")
    options: dict[str, Any] = {"device": device, "provider": provider, "timeout": timeout}
    fixed = run_scenario(recipe.repro, prs=(), **options)
    reverted = run_scenario(recipe.repro, prs=(recipe.pr,), **options)
    return ReproResult(
        pr=recipe.pr, module=recipe.repro, expect=recipe.expect, fixed=fixed, reverted=reverted
    )


def run_repros(
    recipes: Sequence[Recipe],
    *,
    device: str,
    provider: str | None,
    timeout: float,
    jobs: int,
    on_done: Callable[[Recipe, str, ScenarioResult], None] | None = None,
    runner: CommandRunner | None = None,
    gpu_count: Callable[[], int] | None = None,
) -> list[ReproResult]:
    """Every fix's two scenario children, `jobs` at a time; results in the order of `fixes`.

    With `device="cuda"`, `jobs > 1` and several visible GPUs (`gpu_count`, default torch's
    count, or the parent's CUDA_VISIBLE_DEVICES), each child runs with
    `CUDA_VISIBLE_DEVICES` set to one GPU of its own while it runs.

    `on_done(fix, "fixed" | "reverted", result)` is called as each child finishes; `runner`
    starts each child (default: a fresh process; a WarmWorker's `run` forks it warm). When
    anything (an Interrupted from a signal) leaves early, queued runs are cancelled.
    """
    gpus = visible_gpus(os.environ, count=gpu_count) if device == "cuda" and jobs > 1 else []
    leases = GpuLeases(gpus) if len(gpus) > 1 else None

    options: dict[str, Any] = {
        "device": device,
        "provider": provider,
        "timeout": timeout,
        "runner": runner or run_child,
    }

    def run_one(module: str, prs: tuple[int, ...]) -> ScenarioResult:
        if leases is None:
            return run_scenario(module, prs=prs, **options)
        with leases.lease() as gpu:  # one GPU per child: it sees it as cuda:0
            env = {**os.environ, CUDA_VISIBLE_DEVICES: gpu}
            return run_scenario(module, prs=prs, base_env=env, **options)

    runs = [(recipe, variant) for recipe in recipes for variant in _VARIANTS]
    tasks = [
        functools.partial(run_one, str(recipe.repro), (recipe.pr,) if variant == "reverted" else ())
        for recipe, variant in runs
    ]

    def done(index: int, result: ScenarioResult) -> None:
        if on_done is not None:
            on_done(*runs[index], result)

    results = run_parallel(tasks, jobs=jobs, on_done=done)
    return [
        ReproResult(
            pr=recipe.pr,
            module=str(recipe.repro),
            expect=recipe.expect,
            fixed=results[2 * index],
            reverted=results[2 * index + 1],
        )
        for index, recipe in enumerate(recipes)
    ]


def _protocol_line(stderr: str) -> str | None:
    for line in reversed(stderr.splitlines()):
        if line.startswith(OUTCOME_PREFIX):
            return line[len(OUTCOME_PREFIX) :]
    return None


def _from_protocol(payload: str, run: CommandRun, *, module: str) -> ScenarioResult:
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise RunnerError(
            f"scenario {module}: malformed outcome line {OUTCOME_PREFIX}{payload!r}: {exc}; "
            "expected a JSON object with outcome, error, site and message"
        ) from exc
    if not isinstance(data, dict) or data.get("outcome") not in ("clean", "failure"):
        raise RunnerError(
            f"scenario {module}: outcome line {payload!r} has no outcome 'clean' or 'failure'"
        )
    return ScenarioResult(
        kind="clean" if data["outcome"] == "clean" else "failure",
        error=data.get("error"),
        site=data.get("site"),
        message=str(data.get("message") or ""),
        seconds=run.seconds,
        run=run,
    )

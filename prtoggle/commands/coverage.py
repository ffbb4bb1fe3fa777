"""Which tests guard which fixes: a pytest command run plain and once per fix reverted.

A test guards a fix when it passes in the plain run and fails (or errors) in the run with
that fix reverted. Each run is a child process told, through the prtoggle pytest
plugin's options, to write every test's outcome as JSON (`prtoggle.pytest_plugin.outcomes`) and
to run guards_pr tests plain; its output is never parsed.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from prtoggle.errors import RunnerError
from prtoggle.protocol import BOOTSTRAP_FAILURE_EXIT_CODE, BOOTSTRAP_FAILURE_PREFIX, REVERT_ENV
from prtoggle.pytest_plugin.outcomes import NodeOutcome, PytestReport, read_report, report_options
from prtoggle.runners.pool import run_parallel

if TYPE_CHECKING:
    from prtoggle.recipes.registry import Recipe
    from prtoggle.runners.child_process import CommandRun
    from prtoggle.runners.warm_client import CommandRunner

Cell = Literal["guards", "passes", "skipped", "plain-fails", "not-run", "run-failed"]
CELL_SYMBOLS: Mapping[Cell, str] = {
    "guards": "X",
    "passes": ".",
    "skipped": "s",
    "plain-fails": "F",
    "not-run": "?",
    "run-failed": "!",
}
CELL_MEANINGS: Mapping[Cell, str] = {
    "guards": "guards: passes plain, fails with the fix reverted",
    "passes": "still passes with the fix reverted",
    "skipped": "skipped (plain or reverted)",
    "plain-fails": "fails plain: not judged",
    "not-run": "not in the reverted run's report",
    "run-failed": "the reverted run does not count (no report, or its revert did not apply)",
}
DEFAULT_TIMEOUT = 900.0


@dataclass(frozen=True)
class SuiteRun:
    """One run of the pytest command: the PRs it reverted and each test's outcome.

    `error` says why a run has no outcomes (a crash, a timeout, a revert that did not
    apply); `collect_errors` the collectors that failed (a module that does not import).
    """

    prs: tuple[int | str, ...]
    outcomes: Mapping[str, NodeOutcome]
    collect_errors: Mapping[str, str]
    seconds: float
    exit_code: int | None
    error: str | None = None


@dataclass(frozen=True)
class FixCoverage:
    """One fix: the run with it reverted and, per test of the plain run, what it showed."""

    fix: Recipe
    run: SuiteRun
    cells: Mapping[str, Cell]

    @property
    def guarded_by(self) -> tuple[str, ...]:
        return tuple(test for test, cell in self.cells.items() if cell == "guards")


@dataclass(frozen=True)
class CoverageReport:
    """The fix x test matrix, and the tests that fail plain (never counted as guards)."""

    command: tuple[str, ...]
    plain: SuiteRun
    fixes: tuple[FixCoverage, ...]
    seconds: float

    @property
    def tests(self) -> tuple[str, ...]:
        """Every test of the plain run (failed collectors left out), sorted."""
        return tuple(sorted(self.plain.outcomes))

    @property
    def plain_failing(self) -> tuple[str, ...]:
        return tuple(sorted(t for t, outcome in self.plain.outcomes.items() if outcome.failing))

    def unguarded(self) -> tuple[FixCoverage, ...]:
        return tuple(fix for fix in self.fixes if not fix.guarded_by)

    def to_json(self) -> list[dict[str, Any]]:
        """One object per fix: pr, collection, guarded_by, plus the plain-failing tests."""
        plain_failing = [
            {"test": test, "outcome": self.plain.outcomes[test].outcome, "error": error}
            for test in self.plain_failing
            for error in [self.plain.outcomes[test].error]
        ]
        return [
            {
                "pr": entry.fix.pr,
                "collection": entry.fix.collection,
                "title": entry.fix.title,
                "guarded_by": list(entry.guarded_by),
                "partial": entry.fix.partial,
                "not_reverted": [item.text() for item in entry.fix.not_reverted],
                "tests": dict(entry.cells),
                "plain_failing": plain_failing,
                "run_error": entry.run.error,
                "seconds": round(entry.run.seconds, 3),
            }
            for entry in self.fixes
        ]


def run_coverage(
    fixes: Sequence[Recipe],
    command: Sequence[str],
    *,
    jobs: int,
    timeout: float = DEFAULT_TIMEOUT,
    on_run: Callable[[SuiteRun], None] | None = None,
    runner: CommandRunner | None = None,
) -> CoverageReport:
    """Run `command` plain and once per fix reverted (`jobs` at a time) and compare.

    Each fix's run reverts exactly that recipe (SGLANG_DEBUG_REVERT_PR=`collection:PR`),
    so a PR number held by two collections gets one run per recipe and a guard is
    credited only to the recipe whose revert caused it. `runner` starts each run
    (default: a fresh process; a WarmWorker's `run` forks it warm). When anything (an
    Interrupted from a signal) leaves early, queued runs are cancelled.
    """
    if not command:
        raise RunnerError("no command given: expected a pytest command line after `--`")
    started = time.monotonic()
    specs = list(dict.fromkeys(recipe_spec(fix) for fix in fixes))  # one run per recipe
    tasks = [
        functools.partial(run_suite, command, prs=reverts, timeout=timeout, runner=runner)
        for reverts in [(), *((spec,) for spec in specs)]
    ]
    report_run = None if on_run is None else (lambda _index, run: on_run(run))
    runs: dict[tuple[int | str, ...], SuiteRun] = {
        run.prs: run for run in run_parallel(tasks, jobs=jobs, on_done=report_run)
    }
    plain = runs[()]
    if plain.error is not None:
        raise RunnerError(f"the plain run of {' '.join(command)!r} wrote no report: {plain.error}")
    if not plain.outcomes:
        raise RunnerError(f"the plain run of {' '.join(command)!r} ran no test")
    entries = tuple(
        FixCoverage(
            fix=fix,
            run=runs[(recipe_spec(fix),)],
            cells=compare(plain, runs[(recipe_spec(fix),)]),
        )
        for fix in fixes
    )
    return CoverageReport(
        command=tuple(command), plain=plain, fixes=entries, seconds=time.monotonic() - started
    )


def recipe_spec(fix: Recipe) -> str:
    """`collection:PR`: the SGLANG_DEBUG_REVERT_PR value that reverts exactly `fix`."""
    return f"{fix.collection}:{fix.pr}"


def reverts_text(prs: Sequence[int | str]) -> str:
    """`90002 (registry), 26521` for ("registry:90002", 26521): how messages name reverts."""
    parts = []
    for spec in prs:
        collection, _, pr = str(spec).rpartition(":")
        parts.append(f"{pr} ({collection})" if collection else pr)
    return ", ".join(parts)


def run_suite(
    command: Sequence[str],
    *,
    prs: tuple[int | str, ...],
    timeout: float,
    runner: CommandRunner | None = None,
) -> SuiteRun:
    """Run the pytest command once with `prs` (N or `C:N`) reverted at start-up."""
    from prtoggle.revert import child_report
    from prtoggle.revert.toggle import child_env
    from prtoggle.runners.child_process import run_child

    base = {key: value for key, value in os.environ.items() if key != REVERT_ENV}
    env = child_env(prs, base=base) if prs else base
    with tempfile.TemporaryDirectory(prefix="prtoggle-coverage-") as directory:
        report_path = Path(directory) / "report.json"
        argv = [*command, *report_options(report_path), "--continue-on-collection-errors"]
        with child_report.collecting_reports(env) as (env, landing):
            run = (runner or run_child)(argv, env=env, timeout=timeout)
            numbers = tuple(int(str(spec).rpartition(":")[2]) for spec in prs)
            not_landed = child_report.not_landed(
                numbers, child_report.read_reports(landing), command=command
            )
        if run.timed_out:
            error: str | None = f"timed out after {timeout:g} s"
        elif not report_path.exists():
            error = _no_report_error(run, prs)
        else:
            error = not_landed  # e.g. `python -I -m pytest`: its answers are the fixed code's
        report = read_report(report_path) if error is None else None
    if report is not None:
        error = _patch_failure(report, prs)
    return SuiteRun(
        prs=prs,
        outcomes=report.tests if report and error is None else {},
        collect_errors=report.collect_errors if report and error is None else {},
        seconds=run.seconds,
        exit_code=run.returncode,
        error=error,
    )


def compare(plain: SuiteRun, reverted: SuiteRun) -> dict[str, Cell]:
    """Each plain test's cell for one reverted run."""
    cells: dict[str, Cell] = {}
    for test, outcome in sorted(plain.outcomes.items()):
        cells[test] = _cell(test, outcome, reverted)
    return cells


def _cell(test: str, plain: NodeOutcome, reverted: SuiteRun) -> Cell:
    if plain.failing:
        return "plain-fails"
    if plain.outcome != "passed":
        return "skipped"
    if reverted.error is not None:
        return "run-failed"
    outcome = reverted.outcomes.get(test)
    if outcome is None:
        return "guards" if _failed_collector(test, reverted) else "not-run"
    if outcome.failing:
        return "guards"
    return "passes" if outcome.outcome in ("passed", "xpassed") else "skipped"


def _failed_collector(test: str, run: SuiteRun) -> str | None:
    """The failed collector (e.g. a module that no longer imports) that held `test`."""
    for nodeid in run.collect_errors:
        if not nodeid or test.startswith((f"{nodeid}::", f"{nodeid}/")):
            return nodeid
    return None


def _no_report_error(run: CommandRun, prs: tuple[int | str, ...]) -> str:
    """Why a run wrote no report: the start-up hook refused a revert, or the last line."""
    from prtoggle.runners.child_outcome import output_tail

    lines = output_tail(run).splitlines()
    refused = [line for line in lines if line.startswith(f"{BOOTSTRAP_FAILURE_PREFIX}: ")]
    if run.returncode == BOOTSTRAP_FAILURE_EXIT_CODE and refused:
        reason = refused[-1][len(BOOTSTRAP_FAILURE_PREFIX) + 2 :]
        return f"the revert of PR {reverts_text(prs)} did not apply: {reason}"
    last = lines[-1:] or ["no output"]
    return f"exit status {run.returncode}, no report; last line: {last[0]}"


def _patch_failure(report: PytestReport, prs: tuple[int | str, ...]) -> str | None:
    """Why the run does not count: a revert that failed to apply (seen in any error)."""
    from prtoggle.runners.child_outcome import PATCH_FAILURE_NAMES

    errors = [o.error for o in report.tests.values() if o.error] + [*report.collect_errors.values()]
    for error in errors:
        type_name = error.split(":", 1)[0].strip().rsplit(".", 1)[-1]
        if type_name in PATCH_FAILURE_NAMES:
            first_line = error.splitlines()[0]
            return f"the revert of PR {reverts_text(prs)} did not apply: {first_line}"
    return None

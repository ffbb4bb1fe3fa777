"""Reproduce a fix's failure with its own tests: its guards run fixed and reverted, per test."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from prtoggle.commands.coverage_runs import SuiteRun, run_suite
from prtoggle.pytest_plugin.outcomes import NodeOutcome
from prtoggle.recipes.registry import Recipe
from prtoggle.runners.child_process import CommandRun, run_child
from prtoggle.runners.pool import run_parallel

Verdict = Literal[
    "reproduced", "passes reverted", "fails fixed", "fails differently", "not run", "revert failed"
]
_PASSING = ("passed", "xpassed")


@dataclass(frozen=True)
class GuardOutcome:
    """One guard's outcome in one run: passed, failed, error, skipped or `not run`, and its
    failure's `Type: message` (first line)."""

    outcome: str
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome in _PASSING

    @property
    def failed(self) -> bool:
        return self.outcome in ("failed", "error")

    def describe(self) -> str:
        """`passes`, `fails: Type: message`, `skipped`, `not run: why`."""
        if self.passed:
            return "passes"
        if self.failed:
            return f"fails: {self.error or '(no message)'}"
        return self.outcome + (f": {self.error}" if self.error else "")

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "error": self.error}


@dataclass(frozen=True)
class GuardResult:
    """One guard of a fix, fixed and reverted, and whether it reproduces the fix's failure."""

    guard: str
    fixed: GuardOutcome
    reverted: GuardOutcome
    expect: str | None = None

    @property
    def verdict(self) -> Verdict:
        if self.fixed.outcome == "not run":
            return "not run"
        if not self.fixed.passed:  # the environment or the tests: said first
            return "fails fixed"
        if self.reverted.outcome in ("revert failed", "not run"):
            return "revert failed" if self.reverted.outcome == "revert failed" else "not run"
        if not self.reverted.failed:
            return "passes reverted"
        if self.expect is not None and not _matches(self.expect, self.reverted.error):
            return "fails differently"
        return "reproduced"

    def to_dict(self) -> dict[str, Any]:
        return {
            "guard": self.guard,
            "verdict": self.verdict,
            "reproduced": self.verdict == "reproduced",
            "fixed": self.fixed.to_dict(),
            "reverted": self.reverted.to_dict(),
        }


@dataclass(frozen=True)
class GuardsRepro:
    """A fix's guards run fixed and reverted: per guard, and the runs' wall times."""

    recipe: Recipe
    results: tuple[GuardResult, ...]
    seconds: tuple[float, float]
    never_imported: bool = False
    """The reverted run's processes never imported the fix's code: its revert never landed."""

    @property
    def reproduced(self) -> bool:
        return all(result.verdict == "reproduced" for result in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pr": self.recipe.pr,
            "collection": self.recipe.collection,
            "reproduced": self.reproduced,
            "partial": [entry.text() for entry in self.recipe.not_reverted],
            "guards": [result.to_dict() for result in self.results],
            "seconds": {"fixed": round(self.seconds[0], 3), "reverted": round(self.seconds[1], 3)},
            "never_imported": self.never_imported,
        }


def run_guard_repros(
    recipes: Sequence[Recipe],
    *,
    tests: Path,
    source_root: Path | None,
    timeout: float,
    jobs: int,
    on_done: Callable[[Recipe, str, SuiteRun], None] | None = None,
) -> list[GuardsRepro]:
    """Each fix's guards as one pytest child fixed and one reverted, `jobs` at a time.

    The children run in `tests` (node ids are relative to it), with `source_root` first on
    PYTHONPATH when given (else the installed code); the reverted one under prtoggle's
    start-up revert of exactly that recipe (`COLLECTION:PR`).
    """
    base = dict(os.environ)
    if source_root is not None:
        paths = [str(source_root.resolve()), *filter(None, [base.get("PYTHONPATH")])]
        base["PYTHONPATH"] = os.pathsep.join(paths)
    runner = functools.partial(_run_in, cwd=str(tests.resolve()))
    runs = [(recipe, variant) for recipe in recipes for variant in ("fixed", "reverted")]

    def task(recipe: Recipe, variant: str) -> SuiteRun:
        prs = (f"{recipe.collection}:{recipe.pr}",) if variant == "reverted" else ()
        command = guard_command(recipe.guards, tests=tests)
        return run_suite(command, prs=prs, timeout=timeout, runner=runner, base_env=base)

    def done(index: int, run: SuiteRun) -> None:
        if on_done is not None:
            on_done(*runs[index], run)

    tasks = [functools.partial(task, *run) for run in runs]
    suites = run_parallel(tasks, jobs=jobs, on_done=done)
    return [
        _judged(recipe, fixed=suites[2 * index], reverted=suites[2 * index + 1])
        for index, recipe in enumerate(recipes)
    ]


def guard_command(guards: Sequence[str], *, tests: Path) -> list[str]:
    """The pytest command of a fix's guards: their files, relative to `tests` (a node id
    that names no test then fails alone, not the whole run as pytest's "not found")."""
    files = dict.fromkeys(guard.split("::", 1)[0] for guard in guards)
    rootdir = f"--rootdir={tests.resolve()}"
    return [*pytest_command(), rootdir, *files]


def pytest_command() -> list[str]:
    """`python -m pytest -q -p no:cacheprovider`, with `-p prtoggle.pytest_plugin` where
    pytest would not load prtoggle's plugin itself (not installed as a distribution here,
    e.g. on PYTHONPATH, or PYTEST_DISABLE_PLUGIN_AUTOLOAD set)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    plugin = "prtoggle.pytest_plugin"
    installed = any(entry.value == plugin for entry in entry_points(group="pytest11"))
    if not installed or os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        command += ["-p", plugin]
    return command


def guard_outcome(guard: str, run: SuiteRun) -> GuardOutcome:
    """What `run` says of `guard`: its tests (any failing: failed), its file's collection
    error, or why the run has no outcomes."""
    if run.error is not None:
        refused = "did not apply" in run.error or "never reverted" in run.error
        kind = "revert failed" if refused else "not run"
        return GuardOutcome(kind, run.error)
    tests = [o for nodeid, o in run.outcomes.items() if _under(nodeid, guard)]
    if tests:
        return _merged(tests)
    file = guard.split("::", 1)[0]
    for collector, error in run.collect_errors.items():
        if collector in (file, "") or _under(file, collector):
            return GuardOutcome("error", _first_line(error))
    return GuardOutcome("not run", f"no such test in {file}")


def _judged(recipe: Recipe, *, fixed: SuiteRun, reverted: SuiteRun) -> GuardsRepro:
    results = tuple(
        GuardResult(
            guard, guard_outcome(guard, fixed), guard_outcome(guard, reverted), recipe.expect
        )
        for guard in recipe.guards
    )
    seconds = (fixed.seconds, reverted.seconds)
    return GuardsRepro(recipe, results, seconds, never_imported=reverted.never_imported)


def _run_in(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float | None = None,
    cwd: str,
) -> CommandRun:  # fmt: skip
    return run_child(argv, env=env, timeout=timeout, cwd=cwd)


def _merged(tests: Sequence[NodeOutcome]) -> GuardOutcome:
    failing = next((o for o in tests if o.failing), None)
    if failing is not None:
        return GuardOutcome(failing.outcome, _first_line(failing.error or ""))
    if any(o.outcome in _PASSING for o in tests):
        return GuardOutcome("passed")
    return GuardOutcome(tests[0].outcome)


def _under(nodeid: str, guard: str) -> bool:
    """Whether test `nodeid` is `guard` or inside it (a file, a class, a parametrized test)."""
    if nodeid == guard or nodeid.startswith((guard + "::", guard + "[")):
        return True
    return "::" not in guard and PurePosixPath(nodeid.split("::", 1)[0]).is_relative_to(guard)


def _first_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else None


def _matches(pattern: str, text: str | None) -> bool:
    return text is not None and re.search(pattern, text) is not None

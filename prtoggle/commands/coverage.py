"""Which tests guard which fixes: a pytest command run plain and once per fix reverted.

A test guards a fix when it passes in the plain run and fails (or errors) in the run with
that fix reverted. How one run is started and read: `prtoggle.commands.coverage_runs`.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from prtoggle.commands.coverage_runs import PlainGate, SuiteRun, run_suite
from prtoggle.commands.selections import (
    load_default_registry,
    outer_revert,
    revert_selections,
    whole_selections,
)
from prtoggle.errors import CommandUsageError, RunnerError
from prtoggle.pytest_plugin.outcomes import NodeOutcome
from prtoggle.recipes.registry import Recipe, Registry
from prtoggle.revert.toggle import parse_revert_requests
from prtoggle.runners.pool import run_parallel
from prtoggle.runners.warm_client import HEAVY_MODULES, CommandRunner, command_runner, warm_enabled

Cell = Literal[
    "guards", "passes", "skipped", "plain-fails", "not-run", "run-failed", "not-imported"
]
CELL_SYMBOLS: Mapping[Cell, str] = {
    "guards": "X",
    "passes": ".",
    "skipped": "s",
    "plain-fails": "F",
    "not-run": "?",
    "run-failed": "!",
    "not-imported": "-",
}
CELL_MEANINGS: Mapping[Cell, str] = {
    "guards": "guards: passes plain, fails with the fix reverted",
    "passes": "still passes with the fix reverted",
    "skipped": "skipped (plain or reverted)",
    "plain-fails": "fails plain: not judged",
    "not-run": "not in the reverted run's report",
    "run-failed": "the reverted run does not count (no report, or its revert did not apply)",
    "not-imported": "the suite never imported the fix's code: its revert never landed, no result",
}
DEFAULT_TIMEOUT = 900.0


@dataclass(frozen=True)
class RecipeCoverage:
    """One fix: the run with it reverted and, per test of the plain run, what it showed."""

    recipe: Recipe
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
    recipes: tuple[RecipeCoverage, ...]
    seconds: float

    @property
    def tests(self) -> tuple[str, ...]:
        """Every test of the plain run (failed collectors left out), sorted."""
        return tuple(sorted(self.plain.outcomes))

    @property
    def plain_failing(self) -> tuple[str, ...]:
        return tuple(sorted(t for t, outcome in self.plain.outcomes.items() if outcome.failing))

    @property
    def collect_errors(self) -> tuple[tuple[str, str], ...]:
        """(collector, `Type: message`) of each collector that failed in the plain run: a
        test file that does not import, whose tests were never run (nor counted)."""
        return tuple(sorted(self.plain.collect_errors.items()))

    def unguarded(self) -> tuple[RecipeCoverage, ...]:
        return tuple(recipe for recipe in self.recipes if not recipe.guarded_by)

    def to_json(self) -> list[dict[str, Any]]:
        """One object per fix: pr, collection, guarded_by, plus the plain run's failing
        tests and collection errors."""
        plain_failing = [
            {"test": test, "outcome": self.plain.outcomes[test].outcome, "error": error}
            for test in self.plain_failing
            for error in [self.plain.outcomes[test].error]
        ]
        collect_errors = [
            {"collector": node, "error": error} for node, error in self.collect_errors
        ]
        return [
            {
                "pr": entry.recipe.pr,
                "collection": entry.recipe.collection,
                "title": entry.recipe.title,
                "guarded_by": list(entry.guarded_by),
                "partial": entry.recipe.partial,
                "not_reverted": [item.text() for item in entry.recipe.not_reverted],
                "tests": dict(entry.cells),
                "plain_failing": plain_failing,
                "collect_errors": collect_errors,
                "never_imported": entry.run.never_imported,
                "run_error": entry.run.error,
                "seconds": round(entry.run.seconds, 3),
            }
            for entry in self.recipes
        ]


def coverage_recipes(
    specs: Sequence[str],
    *,
    run_all: bool,
    collection: str | None,
    notes: list[str],
    whole_only: bool = False,
) -> tuple[list[Recipe], str | None]:
    """The recipes named by -r (every one that applies here when none), within --collection,
    and the revert of an outer prtoggle run to keep in force in every run (or None).

    The selection rule chooses each PR's recipes (with --collection, `C:N`: collection C's
    only); a PR none of whose recipes applies is refused. `all` (the default) keeps every
    recipe that applies and notes what it left out. A PR the outer run reverts is left
    out (it is reverted in the plain run too). `notes` gets the lines to print on stderr
    as they arise.
    """
    registry = load_default_registry()
    if run_all and specs:
        raise CommandUsageError("give -r PRS or --all, not both")
    outer = outer_revert(os.environ, command="coverage", registry=registry)
    if outer.note is not None:
        notes.append(outer.note)
    scope = registry.in_collection(collection)
    values = tuple(specs) or ("all",)
    if collection is not None:
        values = tuple(_qualified(value, collection, registry) for value in values)
    choice = revert_selections(values, scope, search_path=[os.getcwd()])
    notes.extend(choice.notes)
    selections, whole_notes = whole_selections(
        choice.selections, whole_only=whole_only, everything=choice.everything
    )
    notes.extend(whole_notes)
    order = {name: index for index, name in enumerate(registry.collections())}
    chosen = {r for s in selections for r in s.recipes if r.pr not in outer.prs}
    return sorted(chosen, key=lambda recipe: (recipe.pr, order[recipe.collection])), outer.spec


@contextmanager
def coverage_runner(*, cold: bool) -> Iterator[CommandRunner]:
    """The warm worker (unless `cold` or PRTOGGLE_WARM=0) that runs the suite's pytest runs.

    torch, triton and pytest are imported once; not the fixes' modules: a conftest may set
    variables (TRITON_INTERPRET) that their import reads.
    """
    preload = [*HEAVY_MODULES, "pytest"]
    with command_runner(warm=warm_enabled(cold=cold), preload=preload) as runner:
        yield runner


def run_coverage(
    recipes: Sequence[Recipe],
    command: Sequence[str],
    *,
    jobs: int,
    timeout: float = DEFAULT_TIMEOUT,
    on_run: Callable[[SuiteRun], None] | None = None,
    runner: CommandRunner | None = None,
    keep: str | None = None,
) -> CoverageReport:
    """Run `command` plain and once per fix reverted (`jobs` at a time) and compare.

    Each fix's run reverts exactly that recipe (SGLANG_DEBUG_REVERT_PR=`collection:PR`),
    so a PR number held by two collections gets one run per recipe and a guard is
    credited only to the recipe whose revert caused it. `runner` starts each run
    (default: a fresh process; a WarmWorker's `run` forks it warm). When anything (an
    Interrupted from a signal) leaves early, queued runs are cancelled. `keep`: an outer
    prtoggle run's SGLANG_DEBUG_REVERT_PR, in force in every run, the plain one included.
    """
    if not command:
        raise RunnerError("no command given: expected a pytest command line after `--`")
    started = time.monotonic()
    specs = list(dict.fromkeys(recipe_spec(recipe) for recipe in recipes))  # one run per recipe
    gate = PlainGate()
    run = functools.partial(run_suite, command, timeout=timeout, runner=runner, keep=keep)
    tasks = [
        gate.plain(functools.partial(run, prs=(), on_started=gate.opened.set)),
        *(gate.after_plain((spec,), functools.partial(run, prs=(spec,))) for spec in specs),
    ]

    def tell_run(_index: int, done: SuiteRun) -> None:
        if on_run is not None and done.started and not done.plugin_missing:
            on_run(done)

    runs: dict[tuple[int | str, ...], SuiteRun] = {
        done.prs: done for done in run_parallel(tasks, jobs=jobs, on_done=tell_run)
    }
    plain = runs[()]
    if plain.plugin_missing:
        raise RunnerError(plain.error or "")
    if plain.error is not None:
        raise RunnerError(f"the plain run of {' '.join(command)!r} wrote no report: {plain.error}")
    if not plain.outcomes:
        raise RunnerError(f"the plain run of {' '.join(command)!r} ran no test")
    entries = tuple(
        RecipeCoverage(
            recipe=recipe,
            run=runs[(recipe_spec(recipe),)],
            cells=compare(plain, runs[(recipe_spec(recipe),)]),
        )
        for recipe in recipes
    )
    return CoverageReport(
        command=tuple(command), plain=plain, recipes=entries, seconds=time.monotonic() - started
    )


def recipe_spec(recipe: Recipe) -> str:
    """`collection:PR`: the SGLANG_DEBUG_REVERT_PR value that reverts exactly `fix`."""
    return f"{recipe.collection}:{recipe.pr}"


def compare(plain: SuiteRun, reverted: SuiteRun) -> dict[str, Cell]:
    """Each plain test's cell for one reverted run."""
    cells: dict[str, Cell] = {}
    for test, outcome in sorted(plain.outcomes.items()):
        cells[test] = _cell(test, outcome, reverted)
    return cells


def _qualified(value: str, collection: str, registry: Registry) -> str:
    """`-r` value with every bare PR number qualified by --collection (`all` kept)."""
    requests = parse_revert_requests(value, registry=registry, source="-r")
    if requests is None:
        return value
    return ",".join(
        request.text if request.collection else f"{collection}:{request.pr}" for request in requests
    )


def _cell(test: str, plain: NodeOutcome, reverted: SuiteRun) -> Cell:
    if plain.failing:
        return "plain-fails"
    if plain.outcome != "passed":
        return "skipped"
    if reverted.error is not None:
        return "run-failed"
    if reverted.never_imported:
        return "not-imported"
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

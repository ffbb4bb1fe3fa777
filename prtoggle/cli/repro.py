"""`prtoggle repro`: run each fix's scenario fixed and reverted, in parallel child processes."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from prtoggle.cli.child_runs import child_run_options, require_device
from prtoggle.cli.common import (
    EXIT_NEGATIVE,
    collection_option,
    echo_json,
    format_table,
    json_option,
)
from prtoggle.cli.output import TABLE_WIDTH, cut_cell, plural
from prtoggle.commands.child_runs import (
    recipe_runner,
    require_guard_files,
    select_recipes_having,
    split_selection,
)
from prtoggle.commands.repro import ReproResult, ScenarioResult, run_repros
from prtoggle.commands.selections import load_default_registry
from prtoggle.recipes.registry import Recipe
from prtoggle.runners.child_outcome import output_tail
from prtoggle.runners.requirements import require_installed

if TYPE_CHECKING:  # these import pytest: loaded once it is known installed
    from prtoggle.commands.coverage_runs import SuiteRun
    from prtoggle.commands.repro_guards import GuardsRepro

_WIDTH = 100
_GUARD_WIDTH = 56

_EPILOG = """\b
Both runs get SGLANG_SPEC_NAN_DETECTION=1 SGLANG_SPEC_OOB_DETECTION=1
SGLANG_DEBUG_POISON=1; the reverted run also SGLANG_DEBUG_REVERT_PR=N.
A fix reproduces when its fixed run is clean and its reverted run fails
matching the fix's `expect` regex. SECONDS: the wall time of each run,
fixed / reverted; the last line gives the command's wall time. Exit status 0
only if every selected fix reproduces; 1 if one does not; 2 bad input
(`--device cuda` without CUDA: before any child starts); 129/130/143 interrupted
(running children are ended, queued runs never start).

\b
A fix whose recipe has `guards:` (its own tests, recorded by `prtoggle new
--from-git`) runs them with pytest in two children, fixed and reverted (the
reverted one as `prtoggle run -r COLLECTION:PR` reverts), in --tests DIR
(node ids relative to it; default: here) on the installed code, or on
--source-root DIR put first on PYTHONPATH. A guard reproduces when it passes
fixed and fails reverted (matching `expect`, when the recipe has one); the
others are said: "passes reverted", "fails fixed", "fails differently". A fix
with both a scenario and guards runs both and reproduces when both do.
--all runs the fixes that have a scenario.

\b
Examples:
  prtoggle repro 26521
  prtoggle repro 27338 --tests ../sglang --json
  prtoggle repro --all --jobs 4
  prtoggle repro 24856 --device cuda --provider triton --json
"""


@click.command("repro", epilog=_EPILOG)
@child_run_options(what="repro scenario")
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Children run at once [default: min(4, CPU count)].",
)
@click.option(
    "--tests",
    "tests_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Where the fix's guards (its tests) live: their node ids are relative to it.",
)
@click.option(
    "--source-root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Run the guards on the code in this directory (put first on PYTHONPATH) "
    "[default: the installed package].",
)
@collection_option
@json_option
def repro_command(
    *,
    prs: tuple[int, ...],
    collection: str | None,
    run_all: bool,
    device: str,
    provider: str | None,
    timeout: float,
    jobs: int | None,
    cold: bool,
    tests_dir: Path,
    source_root: Path | None,
    as_json: bool,
) -> None:
    """Reproduce the failure each fix prevented: fixed it passes, reverted it fails."""
    started = time.monotonic()
    recipes, guarded = _selected(prs, run_all=run_all, collection=collection)
    if recipes:
        require_installed("repro", detect=True, runs=[str(recipe.repro) for recipe in recipes])
        require_device(device)
    if guarded:
        require_installed("repro", tools=["pytest"])
        require_guard_files(guarded, tests=tests_dir)
    workers = jobs or min(4, os.cpu_count() or 1)
    results: list[ReproResult] = []
    if recipes:
        with recipe_runner(recipes, cold=cold) as runner:
            results = run_repros(
                recipes, device=device, provider=provider, timeout=timeout, jobs=workers,
                on_done=_print_progress, runner=runner,
            )  # fmt: skip
    from prtoggle.commands.repro_guards import run_guard_repros  # imports pytest: checked above

    guards = run_guard_repros(
        guarded,
        tests=tests_dir,
        source_root=source_root,
        timeout=timeout,
        jobs=workers,
        on_done=_print_guard_progress,
    )
    if as_json:
        echo_json([*(r.to_dict() for r in results), *(g.to_dict() for g in guards)])
    else:
        if results:
            _print_table(results, seconds=time.monotonic() - started)
        for entry in guards:
            _print_guards(entry)
    if not all(r.reproduced for r in results) or not all(g.reproduced for g in guards):
        sys.exit(EXIT_NEGATIVE)


def _selected(
    prs: Sequence[int], *, run_all: bool, collection: str | None
) -> tuple[list[Recipe], list[Recipe]]:
    """The fixes whose scenario runs, and those whose guards run (--all: scenarios only)."""
    registry = load_default_registry(collection=collection)
    if run_all or not prs:
        what = "repro scenario"
        recipes = select_recipes_having(registry, prs, run_all=run_all, key="repro", what=what)
        return recipes, []
    return split_selection(registry, prs)


def _print_guard_progress(recipe: Recipe, variant: str, run: SuiteRun) -> None:
    what = run.error or plural(len(run.outcomes), "test")
    click.echo(f"PR {recipe.pr} guards {variant}: {what} ({run.seconds:.1f} s)", err=True)


def _print_guards(entry: GuardsRepro) -> None:
    """Per guard: fixed, reverted (the failure), verdict; then each failure in full."""
    recipe = entry.recipe
    click.echo(f"\nPR {recipe.pr} ({recipe.label}): its {plural(len(entry.results), 'guard')}")
    if recipe.partial:
        because = "; ".join(item.text() for item in recipe.not_reverted)
        click.echo(_wrapped(f"partial: the failure may not reproduce because {because}"))
    rows = [
        [cut_cell(r.guard, _GUARD_WIDTH, "start"), r.fixed.describe(), r.reverted.describe(),
         r.verdict]
        for r in entry.results
    ]  # fmt: skip
    headers = ["GUARD", "FIXED", "REVERTED", "RESULT"]
    click.echo(format_table(headers, rows, width=_WIDTH, cut={1: "end", 2: "end"}))
    for result in entry.results:
        for variant, outcome in (("fixed", result.fixed), ("reverted", result.reverted)):
            if outcome.error and not outcome.passed and len(outcome.describe()) > 32:
                click.echo(_wrapped(f"{result.guard} {variant}: {outcome.error}"))
    if entry.never_imported:
        click.echo(
            _wrapped(f"the guards never import the code of {recipe.label}: no revert landed")
        )
    done = sum(result.verdict == "reproduced" for result in entry.results)
    fixed, reverted = entry.seconds
    click.echo(
        f"{done} of {len(entry.results)} guards reproduced "
        f"(fixed {fixed:.1f} s, reverted {reverted:.1f} s)"
    )


def _wrapped(text: str) -> str:
    return textwrap.fill(text, width=_WIDTH, subsequent_indent="    ", break_long_words=True)


def _print_progress(recipe: Recipe, variant: str, result: ScenarioResult) -> None:
    """One stderr line per finished child, so a long run shows where it is."""
    click.echo(f"PR {recipe.pr} {variant}: {result.describe()} ({result.seconds:.1f} s)", err=True)


def _print_table(results: Sequence[ReproResult], *, seconds: float) -> None:
    rows = [
        [
            str(result.pr),
            result.fixed.describe(),
            result.reverted.describe(),
            "yes" if result.reproduced else "NO",
            f"{result.fixed.seconds:.1f} / {result.reverted.seconds:.1f}",
        ]
        for result in results
    ]
    headers = ["PR", "FIXED", "REVERTED", "REPRODUCED", "SECONDS"]
    # fits TABLE_WIDTH: a long failure loses its end (the JSON and a non-reproduction's
    # explanation below have it whole)
    click.echo(format_table(headers, rows, width=TABLE_WIDTH, cut={1: "end", 2: "end"}))
    for result in results:
        if not result.reproduced:
            click.echo("")
            click.echo(_explain(result))
    reproduced = sum(result.reproduced for result in results)
    click.echo(f"\n{reproduced} of {plural(len(results), 'fix')} reproduced in {seconds:.1f} s")


def _explain(result: ReproResult) -> str:
    lines = [f"PR {result.pr} ({result.module}) did not reproduce:"]
    if result.fixed.kind != "clean":
        lines.append(f"  fixed run is not clean: {_failure(result.fixed)}")
        lines.append(_indented(output_tail(result.fixed.run, chars=1500)))
    if result.reverted.kind == "clean":
        lines.append("  reverted run is clean: the revert did not bring the failure back")
    elif not result.reverted_matches:
        lines.append(f"  reverted run failed with {_failure(result.reverted)}")
        lines.append(f"  expected a failure matching {result.expect!r}")
        lines.append(_indented(output_tail(result.reverted.run, chars=1500)))
    return "\n".join(lines)


def _failure(scenario: ScenarioResult) -> str:
    if scenario.kind == "timeout":
        return scenario.describe()
    return scenario.failure_text()


def _indented(text: str) -> str:
    return "\n".join(f"    | {line}" for line in text.splitlines())

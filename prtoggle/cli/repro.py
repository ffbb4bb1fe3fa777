"""`prtoggle repro`: run each fix's scenario fixed and reverted, in parallel child processes."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

import click

from prtoggle.cli.child_runs import child_run_options, require_device
from prtoggle.cli.common import (
    EXIT_NEGATIVE,
    collection_option,
    echo_json,
    format_table,
    json_option,
)
from prtoggle.cli.output import TABLE_WIDTH, plural
from prtoggle.commands.child_runs import recipe_runner, recipes_to_run
from prtoggle.commands.repro import ReproResult, ScenarioResult, run_repros
from prtoggle.recipes.registry import Recipe
from prtoggle.runners.child_outcome import output_tail

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
Examples:
  prtoggle repro 26521
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
    as_json: bool,
) -> None:
    """Reproduce the failure each fix prevented: scenario fixed (clean) vs reverted (fails)."""
    started = time.monotonic()
    recipes = recipes_to_run(
        "repro", prs=prs, run_all=run_all, key="repro", what="repro scenario",
        collection=collection,
    )  # fmt: skip
    require_device(device)
    workers = jobs or min(4, os.cpu_count() or 1)
    with recipe_runner(recipes, cold=cold) as runner:
        results = run_repros(
            recipes,
            device=device,
            provider=provider,
            timeout=timeout,
            jobs=workers,
            on_done=_print_progress,
            runner=runner,
        )
    if as_json:
        echo_json([result.to_dict() for result in results])
    else:
        _print_table(results, seconds=time.monotonic() - started)
    if not all(result.reproduced for result in results):
        sys.exit(EXIT_NEGATIVE)


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

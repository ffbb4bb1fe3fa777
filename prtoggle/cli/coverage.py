"""`prtoggle coverage`: which tests of a pytest suite guard which fixes (a CI gate too)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from prtoggle.cli.common import EXIT_NEGATIVE, echo_json, echo_notes, whole_only_option
from prtoggle.cli.output import plural
from prtoggle.commands.child_runs import require_guard_files
from prtoggle.recipes.registry import Recipe
from prtoggle.runners.requirements import require_installed

_EPILOG = """\b
COMMAND is a pytest command line (`pytest ...` or `python -m pytest ...`) with
the prtoggle plugin loaded: prtoggle appends `--no-guard-variants
--prtoggle-report FILE` and reads each test's outcome from FILE, never from
the output. It runs once plain and once per selected fix with only that fix
reverted (SGLANG_DEBUG_REVERT_PR=COLLECTION:N: exactly that recipe, applied at
start-up), --jobs at a time;
`python -m pytest ...` runs fork from a warm worker that imported torch,
triton and pytest once (--cold: fresh processes).
A test guards a fix when it passes plain and fails or errors with the fix
reverted. Tests that fail plain, and test files that do not import plain, are
listed apart (never counted as guards); a fix whose code the suite never
imports is said (no result). The text report leads with each fix's guards,
then the counts, then what could not be judged (--json and --html: all).
Reverted runs start only once the plain run's pytest has started with the
plugin loaded.

Without COMMAND, -r PRS runs the guards those recipes record (their own tests,
`guards:`; node ids relative to the working directory) as `python -m pytest -q
GUARD ...`, and says on stderr how many guards each recipe records.

\b
Exit status: 0 done (with --require-guard: every selected fix is guarded);
1 with --require-guard, some fix is guarded by no test (each is named);
2 bad input, the plugin is not loaded, or the plain run wrote no report.

\b
Examples:
  prtoggle coverage -- python -m pytest -q tests/regression
  prtoggle coverage --require-guard -- python -m pytest -q tests/regression
  prtoggle coverage -r 26521,24856 --jobs 4 --json -- pytest tests
  prtoggle coverage --html coverage.html -- pytest -q tests/regression
  prtoggle coverage -r 27338
"""


@click.command(
    "coverage",
    epilog=_EPILOG,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "-r",
    "--revert",
    "revert_specs",
    multiple=True,
    metavar="PRS",
    help="Fixes to check (`26521,24856`, `sglang:27460`, `all`; repeatable) "
    "[default: every recipe that applies here].",
)
@click.option("--all", "run_all", is_flag=True, help="Every registered fix (the default).")
@click.option("--collection", default=None, help="Only the fixes of this recipe collection.")
@click.option("--require-guard", is_flag=True, help="Exit 1 when a fix is guarded by no test.")
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="pytest runs at once [default: CPU count].",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=900.0,
    show_default=True,
    help="Seconds each pytest run may take before it is killed.",
)
@click.option(
    "--cold",
    is_flag=True,
    help="Start every run as a fresh process (no warm worker; also PRTOGGLE_WARM=0).",
)
@whole_only_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the matrix as a self-contained HTML page to FILE.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def coverage_command(
    *,
    revert_specs: tuple[str, ...],
    run_all: bool,
    collection: str | None,
    require_guard: bool,
    jobs: int | None,
    timeout: float,
    cold: bool,
    whole_only: bool,
    as_json: bool,
    html_path: Path | None,
    command: tuple[str, ...],
) -> None:
    """Run a pytest suite plain and once per fix reverted: which tests guard which fix."""
    require_installed("coverage", tools=["pytest"])
    # Loaded once pytest is known installed (the plugin's modules import it): --help and
    # the missing-pytest error work on the light install.
    from prtoggle.cli.coverage_report import print_progress, print_report
    from prtoggle.cli.coverage_report import unguarded_reason as reason
    from prtoggle.commands.coverage import coverage_recipes, coverage_runner, run_coverage
    from prtoggle.commands.coverage_html import render_html

    if html_path is not None and not html_path.resolve().parent.is_dir():
        raise click.BadParameter(
            f"{html_path}: its directory {html_path.resolve().parent} does not exist",
            param_hint="--html",
        )
    notes: list[str] = []
    try:
        recipes, keep = coverage_recipes(
            revert_specs,
            run_all=run_all,
            collection=collection,
            whole_only=whole_only,
            notes=notes,
        )
    finally:
        echo_notes(notes)
    if not command:
        command = _guards_command(recipes, revert_specs=revert_specs)
    with coverage_runner(cold=cold) as runner:
        report = run_coverage(
            recipes,
            command,
            jobs=jobs or os.cpu_count() or 1,
            timeout=timeout,
            on_run=print_progress,
            runner=runner,
            keep=keep,
        )
    if html_path is not None:
        html_path.write_text(render_html(report), encoding="utf-8")
    if as_json:
        echo_json(report.to_json())
    else:
        print_report(report)
    if html_path is not None:
        click.echo(f"HTML matrix written to {html_path}", err=True)
    unguarded = report.unguarded()
    if require_guard and unguarded:
        names = "; ".join(reason(entry) for entry in unguarded)
        broken = len(report.collect_errors)
        files = plural(broken, "test file")
        hidden = f" ({files} did not import in the plain run)" if broken else ""
        click.echo(f"coverage: no test guards {names}{hidden}", err=True)
        sys.exit(EXIT_NEGATIVE)


def _guards_command(recipes: Sequence[Recipe], *, revert_specs: Sequence[str]) -> tuple[str, ...]:
    """No COMMAND: the guards the -r recipes record, run here with pytest (said on stderr)."""
    from prtoggle.commands.repro_guards import pytest_command

    if not revert_specs:
        raise click.UsageError(
            "expected a pytest COMMAND after `--`, or -r PRS whose recipes record guards"
        )
    guarded = [recipe for recipe in recipes if recipe.guards]
    if not guarded:
        labels = ", ".join(recipe.label for recipe in recipes) or "none"
        raise click.UsageError(
            f"no COMMAND given and the selected recipes ({labels}) record no guards; give a "
            "pytest COMMAND after `--`, or record the fixes' tests (`prtoggle new --from-git "
            "REV` writes `guards:`)"
        )
    require_guard_files(guarded, tests=Path("."))
    for recipe in recipes:
        what = plural(len(recipe.guards), "guard") if recipe.guards else "no guards"
        click.echo(f"coverage: {recipe.label} records {what}", err=True)
    guards = dict.fromkeys(guard for recipe in guarded for guard in recipe.guards)
    return (*pytest_command(), *guards)

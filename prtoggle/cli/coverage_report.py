"""`prtoggle coverage`'s text report: the answer first, then counts, then what was not judged."""

from __future__ import annotations

import click

from prtoggle.cli.common import format_table
from prtoggle.cli.output import TABLE_WIDTH, cut_cell, plural
from prtoggle.commands.coverage import CoverageReport, RecipeCoverage
from prtoggle.commands.coverage_runs import SuiteRun, reverts_text

SHOWN_GUARDS = 5
"""Tests listed per fix in GUARDED BY; the rest are counted."""
SHOWN_NOT_JUDGED = 10
"""Lines of the not-judged list; the rest are counted (--json has them all)."""


def print_report(report: CoverageReport) -> None:
    """Which fixes are guarded and by which tests (or why not), the counts, then one capped
    list of what could not be judged; every line fits TABLE_WIDTH columns."""
    rows = []
    for entry in report.recipes:
        tests = _guard_lines(entry)
        collection = entry.recipe.collection + (" (partial)" if entry.recipe.partial else "")
        guards = str(len(entry.guarded_by))
        rows.append([str(entry.recipe.pr), collection, guards, tests[0]])
        rows.extend(["", "", "", test] for test in tests[1:])
    headers = ["PR", "COLLECTION", "GUARDS", "GUARDED BY"]
    click.echo(format_table(headers, rows, width=TABLE_WIDTH, cut={3: "end"}))
    never = [entry.recipe.label for entry in report.recipes if entry.run.never_imported]
    if never:
        click.echo(_fit(f"never imported by the suite (no result): {', '.join(never)}"))
    click.echo("")
    for line in _count_lines(report):
        click.echo(_fit(line))
    not_judged = _not_judged(report)
    if not_judged:
        click.echo(f"\nnot judged ({plural(len(not_judged), 'item')}):")
        for line in not_judged[:SHOWN_NOT_JUDGED]:
            click.echo(_fit(f"  {line}"))
        more = len(not_judged) - SHOWN_NOT_JUDGED
        if more > 0:
            click.echo(f"  and {more} more (--json for all)")


def print_progress(run: SuiteRun) -> None:
    """One stderr line per finished run."""
    what = f"PR {reverts_text(run.prs)} reverted" if run.prs else "plain"
    result = run.error or plural(len(run.outcomes), "test")
    if run.collect_errors:
        result += f", {plural(len(run.collect_errors), 'test file')} did not import"
    if run.never_imported:
        result += ", its code never imported"
    click.echo(_fit(f"{what}: {result} ({run.seconds:.1f} s)"), err=True)


def unguarded_reason(entry: RecipeCoverage) -> str:
    """`PR N (collection)` and why no test guards it, for --require-guard's line."""
    if entry.run.error:
        why = f": its reverted run failed ({entry.run.error})"
    elif entry.run.never_imported:
        why = ": the suite never imports its code"
    else:
        why = ""
    return f"PR {entry.recipe.pr} ({entry.recipe.collection}){why}"


def _guard_lines(entry: RecipeCoverage) -> list[str]:
    """GUARDED BY: the guarding tests (SHOWN_GUARDS of them, the rest counted), or why none."""
    guards = list(entry.guarded_by)
    if not guards:
        return [_no_guard_text(entry)]
    more = len(guards) - SHOWN_GUARDS
    return guards[:SHOWN_GUARDS] + ([f"and {more} more (--json for all)"] if more > 0 else [])


def _no_guard_text(entry: RecipeCoverage) -> str:
    if entry.run.error:
        return _one_line(entry.run.error)
    if entry.run.never_imported:
        packages = sorted({patch.target.split(".", 1)[0] for patch in entry.recipe.patches})
        return f"NONE: the suite never imports its code ({', '.join(packages)}): no result"
    return "NONE"


def _count_lines(report: CoverageReport) -> list[str]:
    fixes = len(report.recipes)
    guarded = fixes - len(report.unguarded())
    never = sum(1 for entry in report.recipes if entry.run.never_imported)
    first = f"{guarded} of {plural(fixes, 'fix')} guarded" + (
        f", {never} never imported" if never else ""
    )
    tests = plural(len(report.tests), "test")
    failing = len(report.plain_failing)
    broken = len(report.collect_errors)
    details = [f"{failing} failing plain"] if failing else []
    details += [f"{plural(broken, 'test file')} not importable"] if broken else []
    tests += f" ({', '.join(details)})" if details else ""
    lines = [first, f"{tests}; {plural(fixes + 1, 'run')} in {report.seconds:.1f} s"]
    partial = [entry.recipe.label for entry in report.recipes if entry.recipe.partial]
    if partial:  # an answer resting on a partial revert says so
        lines.append(
            "partial reverts (some changes of the fix stay; `prtoggle show` lists them): "
            + ", ".join(partial)
        )
    return lines


def _not_judged(report: CoverageReport) -> list[str]:
    """Each test file that did not import plain, each test failing plain, and each test a
    counted reverted run has no outcome for: once each."""
    lines = [
        f"{collector or '(session)'}: did not import plain: {_one_line(error)}"
        for collector, error in report.collect_errors
    ]
    lines += [
        f"{test}: fails plain: {_one_line(report.plain.outcomes[test].error or '-')}"
        for test in report.plain_failing
    ]
    for entry in report.recipes:
        missing = [test for test, cell in entry.cells.items() if cell == "not-run"]
        lines += [f"{test}: not in the run with {entry.recipe.label} reverted" for test in missing]
    return lines


def _one_line(text: str) -> str:
    """The first non-empty line of `text`; how many more lines it had is said."""
    lines = [line.strip() for line in text.splitlines() if line.strip()] or ["-"]
    more = len(lines) - 1
    return lines[0] + (f" (+{plural(more, 'more line')})" if more else "")


def _fit(line: str) -> str:
    """`line` cut to TABLE_WIDTH columns (an ellipsis marks the cut)."""
    return cut_cell(line, TABLE_WIDTH, "end")

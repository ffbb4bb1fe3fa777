"""`prtoggle coverage --html`: the fix x test matrix as one self-contained page (no network)."""

from __future__ import annotations

import datetime
import html
import shlex

from prtoggle.commands.coverage import CELL_MEANINGS, CELL_SYMBOLS, CoverageReport, RecipeCoverage

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2329; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; }
p.meta { color: #56606b; margin: 0 0 16px; }
code { font: 12px ui-monospace, monospace; background: #f1f3f5; padding: 1px 4px; }
table.matrix { border-collapse: collapse; margin: 8px 0 16px; }
.matrix th, .matrix td { border: 1px solid #d5dae0; padding: 4px 8px; }
.matrix thead th { background: #f6f7f9; vertical-align: bottom; font-weight: 600; }
.matrix th.test { text-align: left; font: 12px ui-monospace, monospace; max-width: 640px;
  overflow-wrap: anywhere; font-weight: normal; }
.matrix th.test .path { display: block; color: #6e7781; }
.matrix th.test .name { display: block; color: #1d2329; font-weight: 600; }
.matrix td.cell { width: 64px; text-align: center; font-weight: 700; }
.matrix td.count, .matrix th.count { text-align: center; }
.pr small { display: block; font-weight: normal; color: #56606b; }
.guards { background: #1a7f37; color: #fff; }
.passes { background: #eef1f4; color: #8a949e; }
.skipped { background: #fbf6e3; color: #8a6d00; }
.plain-fails { background: #c9ced4; color: #3b434b; }
.not-run, .run-failed { background: #f7d4cf; color: #a12a1b; }
.not-imported { background: #fff; color: #b0b7bf; }
.pr.not-imported { background: #f6f7f9; color: #8a949e; font-style: italic; }
.heat0 { background: #cf222e; color: #fff; }
.heat1 { background: #b7e1c1; }
.heat2 { background: #6cc184; }
.heat3 { background: #2d9b4d; color: #fff; }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 8px 20px; }
ul.legend span { display: inline-block; width: 28px; text-align: center; font-weight: 700;
  margin-right: 6px; border: 1px solid #d5dae0; }
.alert { color: #a12a1b; font-weight: 600; }
"""


def render_html(report: CoverageReport) -> str:
    """The whole page: a title, the legend, files that did not import, the matrix (tests x
    fixes) and the failures apart."""
    unguarded = report.unguarded()
    summary = (
        f"{len(report.recipes)} fixes, {len(report.tests)} tests, "
        f"{len(report.recipes) - len(unguarded)} guarded; {report.seconds:.1f} s"
    )
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>prtoggle coverage</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>prtoggle coverage: which tests guard which fixes</h1>",
        f'<p class="meta">{_e(summary)} &middot; {_e(when)} &middot; '
        f"<code>{_e(shlex.join(report.command))}</code></p>",
        _unguarded_line(unguarded),
        _legend(),
        _collect_errors(report),
        _matrix(report),
        _plain_failing(report),
        _run_errors(report),
        "</body></html>",
    ]
    return "\n".join(part for part in parts if part) + "\n"


def _matrix(report: CoverageReport) -> str:
    head = "".join(
        f'<th class="pr{" not-imported" if entry.run.never_imported else ""}" '
        f'title="{_e(entry.recipe.title)}">#{entry.recipe.pr}'
        f"<small>{_e(entry.recipe.collection)}</small>"
        f"{'<small>never imported</small>' if entry.run.never_imported else ''}</th>"
        for entry in report.recipes
    )
    counts = "".join(_count_cell(len(entry.guarded_by)) for entry in report.recipes)
    rows = [
        "<thead>",
        f'<tr><th class="test">test</th>{head}<th class="count">fixes guarded</th></tr>',
        f'<tr><th class="test">tests guarding the fix</th>{counts}<th></th></tr>',
        "</thead><tbody>",
    ]
    for test in report.tests:
        cells = "".join(_cell(entry, test) for entry in report.recipes)
        guarded = sum(entry.cells[test] == "guards" for entry in report.recipes)
        rows.append(
            f'<tr><th class="test">{_test_label(test)}</th>{cells}'
            f'<td class="count">{guarded}</td></tr>'
        )
    rows.append("</tbody>")
    return '<table class="matrix">' + "\n".join(rows) + "</table>"


def _test_label(test: str) -> str:
    """The node id as its file (grey) over its test name, each wrapping on its own."""
    path, separator, name = test.partition("::")
    if not separator:
        return _e(test)
    return f'<span class="path">{_e(path)}::</span><span class="name">{_e(name)}</span>'


def _cell(entry: RecipeCoverage, test: str) -> str:
    cell = entry.cells[test]
    title = f"PR {entry.recipe.pr} reverted: {CELL_MEANINGS[cell]}"
    return f'<td class="cell {cell}" title="{_e(title)}">{_e(CELL_SYMBOLS[cell])}</td>'


def _count_cell(count: int) -> str:
    heat = min(count, 3)
    return f'<td class="count heat{heat}">{count}</td>'


def _legend() -> str:
    items = "".join(
        f'<li><span class="{cell}">{_e(CELL_SYMBOLS[cell])}</span>{_e(meaning)}</li>'
        for cell, meaning in CELL_MEANINGS.items()
    )
    return f'<ul class="legend">{items}</ul>'


def _unguarded_line(unguarded: tuple[RecipeCoverage, ...]) -> str:
    if not unguarded:
        return "<p>Every fix is guarded by at least one test.</p>"
    names = ", ".join(
        f"#{entry.recipe.pr} ({entry.recipe.collection}"
        f"{', never imported' if entry.run.never_imported else ''})"
        for entry in unguarded
    )
    return f'<p class="alert">No test guards: {_e(names)}</p>'


def _collect_errors(report: CoverageReport) -> str:
    if not report.collect_errors:
        return ""
    items = "".join(
        f"<li><code>{_e(collector or '(session)')}</code>: {_e(error)}</li>"
        for collector, error in report.collect_errors
    )
    return (
        '<h2 class="alert">Test files that did not import in the plain run '
        f"(their tests never ran)</h2><ul>{items}</ul>"
    )


def _plain_failing(report: CoverageReport) -> str:
    if not report.plain_failing:
        return ""
    items = "".join(
        f"<li><code>{_e(test)}</code>: {_e(report.plain.outcomes[test].error or '')}</li>"
        for test in report.plain_failing
    )
    return f"<h2>Failing plain (not counted as guards)</h2><ul>{items}</ul>"


def _run_errors(report: CoverageReport) -> str:
    items = "".join(
        f"<li>#{entry.recipe.pr}: {_e(entry.run.error)}</li>"
        for entry in report.recipes
        if entry.run.error is not None
    )
    return f"<h2>Reverted runs that do not count</h2><ul>{items}</ul>" if items else ""


def _e(text: str) -> str:
    return html.escape(text, quote=True)

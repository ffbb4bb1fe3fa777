"""`prtoggle list`: the registered fixes of every collection and whether each revert applies."""

from __future__ import annotations

import sys
from typing import Any

import click

from prtoggle.cli.common import (
    EXIT_ERROR,
    TABLE_WIDTH,
    collection_option,
    echo_json,
    examples_epilog,
    format_table,
    json_option,
    terminal_safe,
    wide_option,
)
from prtoggle.cli.output import Cut
from prtoggle.commands.list import list_records

_CUT: dict[int, Cut] = {1: "end", 5: "end"}
"""Without --wide: COLLECTION and TITLE keep their start (COMPONENT is left out)."""
_APPLIES = {True: "yes", False: "NO", None: "absent"}
_WHY_NOT = {
    "out-of-range": "the installed version is outside the recipe's applies_to (not a failure)",
    "stale": "its match text is not in the installed code (`prtoggle rebase PR` proposes one)",
    "error": "its edit fails to compile or take effect, or its module fails to import",
}
"""APPLIES of a revert that does not apply: the reason's word, and its footnote."""


@click.command(
    "list",
    epilog=examples_epilog(
        "prtoggle list", "prtoggle list --wide", "prtoggle list --collection fixes --json"
    ),
)
@collection_option
@wide_option
@json_option
def list_command(collection: str | None, wide: bool, as_json: bool) -> None:
    """List the registered fixes of every collection and whether each revert applies.

    The sources are read as files: nothing is imported (torch neither). APPLIES is
    `absent` when the fix's package is neither installed nor in the working directory;
    a revert that does not apply says why: `out-of-range` (the installed version is
    outside its applies_to), `stale` (its match text is not in the code) or `error`,
    each word explained under the table. A
    title marked `(partial)`: its revert leaves some changes of the fix as they are
    (`prtoggle show PR` lists them). Lines fit 100 columns (a long TITLE loses its end;
    --wide: every cell whole, and a COMPONENT column). A recipe file that cannot be read is
    listed as ERROR, its error on stderr, and the status is 2; the other recipes are listed
    as usual.
    """
    records, bad = list_records(collection=collection)
    if as_json:
        echo_json(records)
    else:
        _print_table(records, wide=wide)
    for recipe in bad:
        click.echo(f"error: {terminal_safe(recipe.error)}", err=True)
    if bad:
        sys.exit(EXIT_ERROR)


def _print_table(records: list[dict[str, Any]], *, wide: bool) -> None:
    headers = ["PR", "COLLECTION", "MERGED", "SYMPTOM", "APPLIES", "TITLE"]
    rows = [
        [
            str(r["pr"] or "?"),
            r["collection"],
            r["merged"] or "-",
            r["symptom"] or "-",
            "ERROR" if r["error"] else (r["why_not"] or _APPLIES[r["applies"]]),
            ("(partial) " if r["partial"] else "") + (r["title"] or r["error"] or "-"),
        ]
        for r in records
    ]
    if wide:
        headers.insert(3, "COMPONENT")
        for row, record in zip(rows, records, strict=True):
            row.insert(3, record["component"] or "-")
        click.echo(format_table(headers, rows))
    else:
        click.echo(format_table(headers, rows, width=TABLE_WIDTH, cut=_CUT))
    for word in sorted({r["why_not"] for r in records if r["why_not"] and not r["error"]}):
        click.echo(f"{word}: {_WHY_NOT[word]}")
    if any(record["partial"] for record in records):
        click.echo(
            "(partial): the revert leaves some changes of the fix as they are; "
            "`prtoggle show PR` lists them"
        )

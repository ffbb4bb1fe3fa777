"""`prtoggle list`: the registered fixes of every collection and whether each revert applies."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

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
from prtoggle.cli.show import recipe_metadata
from prtoggle.recipes.resolution import (
    checks_per_fix,
    command_search_path,
    import_free_source_root,
)

if TYPE_CHECKING:
    from prtoggle.cli.output import Cut
    from prtoggle.recipes.check import TargetCheck
    from prtoggle.recipes.registry import BadRecipe, Recipe

_CUT: dict[int, Cut] = {1: "end", 5: "end"}
"""Without --wide: COLLECTION and TITLE keep their start (COMPONENT is left out)."""
_APPLIES = {True: "yes", False: "NO", None: "absent"}


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
    `absent` when the fix's package is neither installed nor in the working directory. A
    title marked `(partial)`: its revert leaves some changes of the fix as they are
    (`prtoggle show PR` lists them). Lines fit 100 columns (a long TITLE loses its end;
    --wide: every cell whole, and a COMPONENT column). A recipe file that cannot be read is
    listed as ERROR, its error on stderr, and the status is 2; the other recipes are listed
    as usual.
    """
    from prtoggle.recipes.registry import registry_with_errors

    registry, bad = registry_with_errors()
    fixes = registry.in_collection(collection).fixes
    bad = tuple(b for b in bad if collection in (None, b.collection))
    search_path = command_search_path()
    checks = checks_per_fix(fixes, search_path=search_path)
    records = [_list_record(fix, checks[fix], search_path=search_path) for fix in fixes]
    records += [_bad_record(recipe) for recipe in bad]
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
            "ERROR" if r["error"] else _APPLIES[r["applies"]],
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
    if any(record["partial"] for record in records):
        click.echo(
            "(partial): the revert leaves some changes of the fix as they are; "
            "`prtoggle show PR` lists them"
        )


def _list_record(
    fix: Recipe, checks: list[TargetCheck], *, search_path: list[str]
) -> dict[str, Any]:
    """`applies` is None when the fix's package is found nowhere (absent)."""
    record = recipe_metadata(fix)
    absent = import_free_source_root(fix, search_path=search_path) is None
    record["applies"] = None if absent else all(check.ok for check in checks)
    record["problems"] = [f"{check.target}: {check.message}" for check in checks if not check.ok]
    record["error"] = None
    return record


def _bad_record(recipe: BadRecipe) -> dict[str, Any]:
    """A recipe file that cannot be read: the keys of a recipe, null, and its `error`."""
    record: dict[str, Any] = dict.fromkeys(_RECORD_KEYS)
    record |= {"pr": recipe.pr, "collection": recipe.collection, "file": str(recipe.path)}
    record |= {"acts_at_capture": False, "targets": [], "problems": [], "error": recipe.error}
    record |= {"names": [], "partial": False, "not_reverted": []}
    return record


_RECORD_KEYS = (
    "pr",
    "collection",
    "title",
    "url",
    "merged",
    "component",
    "symptom",
    "expect",
    "repro",
    "bench",
    "file",
    "acts_at_capture",
    "targets",
    "names",
    "partial",
    "not_reverted",
    "applies",
    "problems",
    "error",
)

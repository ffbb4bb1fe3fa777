"""`prtoggle list`: the registered fixes of every collection and whether each revert applies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from prtoggle.cli.common import (
    collection_option,
    echo_json,
    examples_epilog,
    format_table,
    json_option,
    load_default_registry,
)
from prtoggle.cli.show import recipe_metadata
from prtoggle.recipes.resolution import (
    checks_per_fix,
    command_search_path,
    import_free_source_root,
)

if TYPE_CHECKING:
    from prtoggle.recipes.check import TargetCheck
    from prtoggle.recipes.registry import Recipe


@click.command(
    "list",
    epilog=examples_epilog("prtoggle list", "prtoggle list --collection fixes --json"),
)
@collection_option
@json_option
def list_command(collection: str | None, as_json: bool) -> None:
    """List the registered fixes of every collection and whether each revert applies.

    The sources are read as files: nothing is imported (torch neither). APPLIES is
    `absent` when the fix's package is neither installed nor in the working directory. A
    title marked `(partial)`: its revert leaves some changes of the fix as they are
    (`prtoggle show PR` lists them).
    """
    fixes = load_default_registry(collection=collection).fixes
    search_path = command_search_path()
    checks = checks_per_fix(fixes, search_path=search_path)
    records = [_list_record(fix, checks[fix], search_path=search_path) for fix in fixes]
    if as_json:
        echo_json(records)
        return
    applies = {True: "yes", False: "NO", None: "absent"}
    rows = [
        [
            str(r["pr"]),
            r["collection"],
            r["merged"] or "-",
            r["component"] or "-",
            r["symptom"] or "-",
            applies[r["applies"]],
            ("(partial) " if r["partial"] else "") + (r["title"] or "-"),
        ]
        for r in records
    ]
    headers = ["PR", "COLLECTION", "MERGED", "COMPONENT", "SYMPTOM", "APPLIES", "TITLE"]
    click.echo(format_table(headers, rows))
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
    return record

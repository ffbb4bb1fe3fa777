"""`prtoggle show`: a fix's metadata and a unified diff, fixed -> reverted, per target."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from prtoggle.cli.common import (
    EXIT_STATUS_HELP,
    collection_option,
    echo_json,
    json_option,
    load_default_registry,
)
from prtoggle.errors import PatchApplicationError
from prtoggle.recipes.packages import import_free_source_root, refuse_absent_packages

if TYPE_CHECKING:
    from prtoggle.recipes.registry import Recipe

CAPTURE_NOTE = (
    "acts at CUDA graph capture: revert before capture; a graph captured with the fix keeps it"
)


@click.command(
    "show",
    epilog=EXIT_STATUS_HELP
    + "\b\nExamples:\n  prtoggle show 21649 --collection sglang\n"
    + "  prtoggle show 27460 --collection fixes --json",
)
@click.argument("pr", type=int)
@collection_option
@json_option
def show_command(pr: int, collection: str | None, as_json: bool) -> None:
    """Show fix PR: its metadata and a unified diff, fixed -> reverted, per target.

    A PR number registered in several collections needs --collection (the error lists them).
    """
    from prtoggle.recipes.check import fix_diffs

    fix = load_default_registry(collection=collection).get(pr)
    try:
        refuse_absent_packages(fix)
        diffs = fix_diffs(fix, source_root=import_free_source_root(fix))
    except PatchApplicationError:
        if not as_json:  # the metadata still helps; the error line follows
            _print_metadata(fix)
        raise
    if as_json:
        record = recipe_metadata(fix)
        record["diffs"] = [
            {
                "target": diff.target,
                "filename": diff.filename,
                "first_line": diff.first_line,
                "diff": diff.unified_diff(),
            }
            for diff in diffs
        ]
        echo_json(record)
        return
    _print_metadata(fix)
    for diff in diffs:
        click.echo("")
        click.echo(diff.unified_diff().rstrip("\n"))


def recipe_metadata(fix: Recipe) -> dict[str, Any]:
    """A recipe's metadata as `show --json` and `list --json` give it."""
    return {
        "pr": fix.pr,
        "collection": fix.collection,
        "title": fix.title,
        "url": fix.url,
        "merged": fix.merged.isoformat() if fix.merged else None,
        "component": fix.component,
        "symptom": fix.symptom,
        "expect": fix.expect,
        "repro": fix.repro,
        "bench": fix.bench,
        "file": str(fix.path),
        "acts_at_capture": fix.acts_at_capture,
        "targets": [patch.target for patch in fix.patches],
    }


def _print_metadata(fix: Recipe) -> None:
    click.echo(f"PR {fix.pr}: {fix.title or '(untitled)'}")
    for key, value in recipe_metadata(fix).items():
        if key not in ("pr", "title", "acts_at_capture", "targets") and value is not None:
            click.echo(f"  {(key + ':').ljust(10)} {value}")
    click.echo(f"  targets:   {', '.join(patch.target for patch in fix.patches)}")
    if fix.acts_at_capture:
        click.echo(f"  note:      {CAPTURE_NOTE}")

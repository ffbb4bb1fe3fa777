"""`prtoggle rebase`: propose stale recipes updated for the code they no longer apply to."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from prtoggle.cli.common import (
    EXIT_NEGATIVE,
    EXIT_STATUS_HELP,
    collection_option,
    echo_json,
    json_option,
    recipe_out_option,
)
from prtoggle.commands.rebase import Rebase, rebase_prs

_EPILOG = """\b
Per edit: exact (its match occurs once as it is), re-anchored (its match drifted:
the edit is merged onto the one window of the new text it drifted to, when the
drift and the edit change different lines), moved (the target is gone: the one
function of its package where every edit matches exactly; else the function most
similar to the edits' matches, when 0.1 ahead of the next: a tie names both and
declines), not-found; with a similarity in 0..1. When in doubt it declines:
nothing is written unless the result checks ok. Several PRs: each recipe in
turn under a `COLLECTION/PR:` line (--json: a list), the code read once for all.
Exit status 0 written (rebased) or unchanged (already ok); 1 could not rebase
(the blocking edits named; with several PRs, any of them); 2 bad input.

\b
Examples:
  prtoggle rebase 27338 --collection sglang --source-root sglang-0.5.23.whl
  prtoggle rebase 26972 --out yaml/mine --json
  prtoggle rebase 26972 27360 25015 --collection sglang-upstream --out yaml/mine
"""


@click.command("rebase", epilog=EXIT_STATUS_HELP + _EPILOG)
@click.argument("prs", metavar="PR...", type=int, nargs=-1, required=True)
@collection_option
@click.option(
    "--source-root",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="The code to rebase onto: a directory, wheel or sdist (default: the installed "
    "package of the recipe's targets).",
)
@recipe_out_option
@json_option
def rebase_command(
    prs: tuple[int, ...], collection: str | None, source_root: Path | None, out: Path, as_json: bool
) -> None:
    """Propose recipe PR updated for code it no longer applies to (moved, drifted)."""
    results = rebase_prs(prs, collection=collection, source_root=source_root, out=out)
    if len(set(prs)) == 1:  # one PR (given once or more): the one answer, as before
        answers = [next(results)]
        _print_rebase(answers[0], as_json=as_json)
    elif as_json:
        answers = list(results)
        echo_json([_rebase_json(result) for result in answers])
    else:
        answers = []
        for result in results:
            click.echo(f"{result.recipe.label}:")
            _print_rebase(result, as_json=False)
            answers.append(result)
    if any(result.status == "failed" for result in answers):
        sys.exit(EXIT_NEGATIVE)


def _print_rebase(result: Rebase, *, as_json: bool) -> None:
    recipe = result.recipe
    if as_json:
        echo_json(_rebase_json(result))
        return
    for index, edit in enumerate(result.edits, start=1):
        moved = f" (was {edit.old_target})" if edit.old_target != edit.target else ""
        click.echo(
            f"edit {index}: {edit.target}{moved}: {edit.status} (similarity {edit.similarity:.2f})"
        )
    if result.status == "rebased":
        click.echo(f"rebased: wrote {result.path}")
    elif result.status == "unchanged":
        click.echo(f"unchanged: {recipe.label} already applies; nothing written")
    else:
        click.echo(f"could not rebase {recipe.label}: {result.reason}; nothing written")


def _rebase_json(result: Rebase) -> dict[str, object]:
    edits = [
        {"target": e.target, "old_target": e.old_target, "status": e.status}
        | {"similarity": e.similarity, "reason": e.reason}
        for e in result.edits
    ]
    recipe = result.recipe
    return {"pr": recipe.pr, "collection": recipe.collection, "status": result.status} | {
        "edits": edits
    }

"""`prtoggle show`: a fix's metadata and a unified diff, fixed -> reverted, per target."""

from __future__ import annotations

import textwrap
from typing import Any

import click

from prtoggle.cli.common import (
    TABLE_WIDTH,
    collection_option,
    echo_json,
    examples_epilog,
    json_option,
    terminal_safe,
)
from prtoggle.commands.selections import load_default_registry
from prtoggle.commands.show import diffs_or_error, recipe_metadata
from prtoggle.errors import PrToggleError
from prtoggle.recipes.check import TargetDiff
from prtoggle.recipes.registry import Recipe

_WHOLE = ("names", "partial", "not_reverted", "guards", "added_modules")
CAPTURE_NOTE = (
    "acts at CUDA graph capture: revert before capture; a graph captured with the fix keeps it"
)


@click.command(
    "show",
    epilog=examples_epilog("prtoggle show 26521", "prtoggle show 27460 --collection fixes --json"),
)
@click.argument("pr", type=int)
@collection_option
@json_option
def show_command(pr: int, collection: str | None, as_json: bool) -> None:
    """Show fix PR: every collection's recipe of it, metadata and a diff fixed -> reverted.

    One section per collection holding PR (--collection: that one only). A recipe whose
    diff cannot be shown here (package absent, version outside its applies_to, stale
    text) says why in its section; when no section can show a diff, the first reason is
    the error (exit 2). --json prints a list: one object per recipe, with `diffs` (a list)
    or `error` (a string).
    """
    recipes = load_default_registry(collection=collection).find(pr, collection=collection)
    shown = [(recipe, *diffs_or_error(recipe)) for recipe in recipes]
    errors = [error for _, _, error in shown if error is not None]
    if as_json:
        if len(errors) == len(shown):
            raise errors[0]
        echo_json([_json_record(recipe, diffs, error) for recipe, diffs, error in shown])
        return
    for index, (recipe, diffs, error) in enumerate(shown):
        if index:
            click.echo("")
        _print_section(recipe, diffs, error)
    if len(errors) == len(shown):
        raise errors[0]


def _json_record(
    recipe: Recipe, diffs: list[TargetDiff], error: PrToggleError | None
) -> dict[str, Any]:
    record = recipe_metadata(recipe)
    if error is not None:
        record["error"] = str(error)
        return record
    record["diffs"] = [
        {
            "target": diff.target,
            "filename": diff.filename,
            "first_line": diff.first_line,
            "diff": diff.unified_diff(),
        }
        for diff in diffs
    ]
    return record


def _print_section(recipe: Recipe, diffs: list[TargetDiff], error: PrToggleError | None) -> None:
    _print_metadata(recipe)
    if error is not None:
        click.echo(f"  not shown: {terminal_safe(str(error))}")
    for diff in diffs:
        click.echo("")
        click.echo(terminal_safe(diff.unified_diff().rstrip("\n"), lines=True))
    for change in recipe.names if error is None else ():
        click.echo("")
        click.echo(f"names of {terminal_safe(change.scope)}, reverted:")
        lines = [f"+ {line}" for line in change.define.splitlines()]
        text = "\n".join([*lines, *(f"- {name} (removed)" for name in change.remove)])
        click.echo(terminal_safe(text, lines=True))


def _print_metadata(recipe: Recipe) -> None:
    """One line per key; every recipe-given value escaped to stay on its line."""
    click.echo(f"PR {recipe.pr}: {terminal_safe(recipe.title or '(untitled)')}")
    for key, value in recipe_metadata(recipe).items():
        if key not in ("pr", "title", "acts_at_capture", "targets", *_WHOLE) and value is not None:
            click.echo(f"  {(key + ':').ljust(10)} {terminal_safe(str(value))}")
    for index, patch in enumerate(recipe.patches):  # one a line: a target is long
        click.echo(f"  {'targets:' if index == 0 else '':10} {terminal_safe(patch.target)}")
    if recipe.acts_at_capture:
        note = textwrap.wrap(CAPTURE_NOTE, width=TABLE_WIDTH - 13)
        click.echo(
            "\n".join(f"  {'note:' if i == 0 else '':10} {line}" for i, line in enumerate(note))
        )
    _print_whole_fix(recipe)


def _print_whole_fix(recipe: Recipe) -> None:
    """The names a revert changes, and what it leaves as the fix made it (partial)."""
    for change in recipe.names:
        parts = [f"define {', '.join(change.defined)}"] if change.defined else []
        parts += [f"remove {', '.join(change.remove)}"] if change.remove else []
        click.echo(f"  names:     {terminal_safe(change.scope)}: {terminal_safe('; '.join(parts))}")
    if recipe.added_modules:
        added = ", ".join(recipe.added_modules)
        click.echo(f"  added:     {terminal_safe(added)} (not importable reverted)")
    if recipe.partial:
        count = len(recipe.not_reverted)
        click.echo(f"  partial:   {count} change{'s' if count != 1 else ''} not reverted:")
        for item in recipe.not_reverted:
            click.echo(f"             {terminal_safe(item.text())}")
    if recipe.guards:
        count = len(recipe.guards)
        tests = f"{count} test{'s' if count != 1 else ''}"
        click.echo(f"  guards:    {tests} the fix added or changed:")
        for guard in recipe.guards:
            click.echo(f"             {terminal_safe(guard)}")

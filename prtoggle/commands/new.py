"""`new`: a recipe drafted from a diff, checked, and written as OUT/<PR>.yaml."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prtoggle.errors import RegistryError
from prtoggle.patching.source_files import SourceTree
from prtoggle.recipes.authoring.from_diff import SkippedChange, draft_from_diff
from prtoggle.recipes.authoring.recipe_file import (
    RecipeHeader,
    checked_recipe,
    recipe_destination,
    write_recipe,
)
from prtoggle.recipes.schema import MAX_PR, MIN_PR


class NothingPlaceable(RegistryError):
    """No change of the diff can be reverted at run time: no recipe to write."""


@dataclass(frozen=True)
class NewRecipe:
    """What `new` wrote: the file, its targets (dotted names) and the changes skipped."""

    pr: int
    path: Path
    targets: tuple[str, ...]
    skipped: tuple[SkippedChange, ...]


def default_title(files: Sequence[str]) -> str:
    """`Revert of <file>` (and how many more files the diff changes)."""
    if not files:
        return "Revert"
    more = len(files) - 1
    tail = f" and {more} more file{'s' if more > 1 else ''}" if more else ""
    return f"Revert of {files[0]}{tail}"


def new_from_diff(
    text: str,
    *,
    source: str,
    roots: Sequence[SourceTree],
    header: RecipeHeader,
    out: Path,
) -> NewRecipe:
    """Draft, check and write the recipe of diff `text`; NothingPlaceable when none is left.

    `header.title` empty: the default title naming the changed files. A destination that
    cannot be written (see recipe_destination) is refused before the diff is read.
    """
    if not MIN_PR <= header.pr <= MAX_PR:
        raise RegistryError(
            f"PR {header.pr} (of {source}): outside the supported range {MIN_PR}..{MAX_PR}; "
            "expected the fix's PR number"
        )
    destination = recipe_destination(out, header.pr)
    draft = draft_from_diff(text, source=source, roots=roots)
    if not header.title:
        header = RecipeHeader(header.pr, default_title(draft.files), header.url, header.merged)
    recipe, kept, failed = checked_recipe(header, draft.targets, path=destination)
    skipped = (*draft.skipped, *failed)
    if not kept:
        reasons = sorted({change.reason for change in skipped}) or ["the diff changes nothing"]
        raise NothingPlaceable(
            f"{source}: nothing placeable: {len(skipped)} change(s) skipped "
            f"({'; '.join(reasons)}); expected a change inside a function of the post-fix "
            "code"
        )
    path = write_recipe(recipe, out=out, pr=header.pr)
    return NewRecipe(header.pr, path, tuple(t.target for t in kept), skipped)

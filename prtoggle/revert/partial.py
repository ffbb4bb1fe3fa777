"""Partial reverts (recipes with `not_reverted`): how every revert says so, and how to refuse them.

A partial recipe leaves some changes of its fix as the fix made them. Each revert of one
says it: the in-force line, a PartialRevertWarning from `reverted()` / `apply_revert()`,
`run`'s line, `show`, `list`, `coverage`, `bisect`. PRTOGGLE_WHOLE_ONLY=1 (or a command's
`--whole-only`) refuses an explicit request that would use one; `all` leaves them out
with one line saying so.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from prtoggle.errors import PartialRevertWarning, RevertSpecError
from prtoggle.protocol import WHOLE_ONLY_ENV
from prtoggle.recipes.prs import join_prs
from prtoggle.recipes.registry import Recipe

if TYPE_CHECKING:
    from prtoggle.recipes.selection import Selection

logger = logging.getLogger(__name__)

MAX_LISTED = 3
"""How many not-reverted changes one line lists before `...`."""


def whole_only(env: Mapping[str, str] | None = None) -> bool:
    """Whether PRTOGGLE_WHOLE_ONLY asks to refuse partial reverts (`1`, `true`, `yes`)."""
    value = (os.environ if env is None else env).get(WHOLE_ONLY_ENV, "")
    return value.strip().lower() in ("1", "true", "yes")


def partial_note(recipes: Sequence[Recipe]) -> str | None:
    """`partial: 2 changes not reverted: f.py:120 reason; ...` (None: every recipe is whole)."""
    kept = [item for recipe in recipes for item in recipe.not_reverted]
    if not kept:
        return None
    count = f"{len(kept)} change{'s' if len(kept) != 1 else ''}"
    listed = "; ".join(item.text() for item in kept[:MAX_LISTED])
    more = f"; ... ({len(kept) - MAX_LISTED} more)" if len(kept) > MAX_LISTED else ""
    return f"partial: {count} not reverted: {listed}{more}"


def in_force_line(pr: int, recipes: Sequence[Recipe]) -> str | None:
    """`PR N in force (partial: ...)` for a partial PR; None for a whole one."""
    note = partial_note(recipes)
    return None if note is None else f"PR {pr} in force ({note})"


def refuse_partial(
    per_pr: Mapping[int, Sequence[Recipe]], *, everything: bool, source: str
) -> dict[int, list[Recipe]]:
    """Under PRTOGGLE_WHOLE_ONLY=1: an explicit request of a partial recipe is refused.

    With `everything` (`all`), partial recipes are left out instead and one warning says
    which. Without the variable, `per_pr` comes back unchanged.
    """
    kept = {pr: list(recipes) for pr, recipes in per_pr.items()}
    if not whole_only():
        return kept
    partial = {pr: [r for r in recipes if r.partial] for pr, recipes in kept.items()}
    partial = {pr: recipes for pr, recipes in partial.items() if recipes}
    if not partial:
        return kept
    if not everything:
        pr, recipes = next(iter(partial.items()))
        raise RevertSpecError(whole_only_refusal(recipes[0], source=source))
    logger.warning(
        "%s=all: PRs %s left out: partial reverts (%s=1)", source, join_prs(partial), WHOLE_ONLY_ENV
    )
    for pr, recipes in partial.items():
        kept[pr] = [recipe for recipe in kept[pr] if recipe not in recipes]
    return {pr: recipes for pr, recipes in kept.items() if recipes}


def keep_whole(
    selections: Sequence[Selection], *, whole_only: bool, everything: bool, source: str
) -> tuple[tuple[Selection, ...], str | None]:
    """A command's `--whole-only` at selection: the selections kept, and a note of the rest.

    An explicit request whose recipes include a partial one is refused (RevertSpecError);
    with `everything` (`all`, or no request) partial recipes are dropped and the note says
    which. Without `whole_only`, everything is kept.
    """
    partial = [recipe for selection in selections for recipe in selection.recipes if recipe.partial]
    if not whole_only or not partial:
        return tuple(selections), None
    if not everything:
        raise RevertSpecError(whole_only_refusal(partial[0], source=source))
    kept = tuple(
        dataclasses.replace(s, recipes=tuple(r for r in s.recipes if not r.partial))
        for s in selections
    )
    labels = ", ".join(recipe.label for recipe in partial)
    return kept, f"left out, partial reverts (--whole-only): {labels}"


def whole_only_refusal(recipe: Recipe, *, source: str) -> str:
    """The one line refusing `recipe` where only whole reverts are wanted."""
    note = partial_note([recipe])
    return (
        f"{source}: PR {recipe.pr} ({recipe.label}) is a partial revert ({note}), and only "
        f"whole reverts are wanted here ({WHOLE_ONLY_ENV}=1 or --whole-only); leave PR "
        f"{recipe.pr} out, or accept partial reverts"
    )


def warn_partial(per_pr: Mapping[int, Sequence[Recipe]], *, stacklevel: int) -> None:
    """One PartialRevertWarning per partial PR just put in force by code (`reverted()`)."""
    for pr, recipes in per_pr.items():
        line = in_force_line(pr, recipes)
        if line is not None:
            warnings.warn(line, PartialRevertWarning, stacklevel=stacklevel + 1)

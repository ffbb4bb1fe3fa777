"""`show`: a recipe's metadata as `show --json` and `list --json` give it, and its diffs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prtoggle.errors import PrToggleError
from prtoggle.recipes.registry import Recipe
from prtoggle.recipes.resolution import (
    command_search_path,
    import_free_source_root,
    refuse_absent_packages,
)

if TYPE_CHECKING:
    from prtoggle.recipes.check import TargetDiff


def recipe_metadata(recipe: Recipe) -> dict[str, Any]:
    """A recipe's metadata as `show --json` and `list --json` give it."""
    return {
        "pr": recipe.pr,
        "collection": recipe.collection,
        "title": recipe.title,
        "url": recipe.url,
        "merged": recipe.merged.isoformat() if recipe.merged else None,
        "component": recipe.component,
        "symptom": recipe.symptom,
        "expect": recipe.expect,
        "repro": recipe.repro,
        "bench": recipe.bench,
        "file": str(recipe.path),
        "acts_at_capture": recipe.acts_at_capture,
        "targets": [patch.target for patch in recipe.patches],
        **whole_fix_metadata(recipe),
    }


def whole_fix_metadata(recipe: Recipe) -> dict[str, Any]:
    """`names`, `partial`, `not_reverted`, `guards` and `added_modules` as `show --json`
    and `list --json` give them."""
    return {
        "names": [
            {"scope": n.scope, "define": n.define, "remove": list(n.remove)} for n in recipe.names
        ],
        "partial": recipe.partial,
        "not_reverted": [
            {"file": k.file, "line": k.line, "reason": k.reason, "code": k.code}
            for k in recipe.not_reverted
        ],
        "guards": list(recipe.guards),
        "added_modules": list(recipe.added_modules),
    }


def diffs_or_error(recipe: Recipe) -> tuple[list[TargetDiff], PrToggleError | None]:
    """The recipe's diffs fixed -> reverted, or why they cannot be shown here."""
    from prtoggle.recipes.check import recipe_diffs  # the checker: not loaded by `list`

    search_path = command_search_path()
    try:
        refuse_absent_packages(recipe, search_path=search_path)
        root = import_free_source_root(recipe, search_path=search_path)
        return recipe_diffs(recipe, source_root=root), None
    except PrToggleError as exc:
        return [], exc

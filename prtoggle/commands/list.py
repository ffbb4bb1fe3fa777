"""`list`: a record of every registered recipe (metadata, whether it applies) and bad files."""

from __future__ import annotations

from typing import Any

from prtoggle.commands.show import recipe_metadata
from prtoggle.recipes.registry import BadRecipe, Recipe, registry_with_errors
from prtoggle.recipes.resolution import (
    checks_per_recipe,
    command_search_path,
    import_free_source_root,
)
from prtoggle.recipes.schema import DESCRIPTION_KEYS
from prtoggle.recipes.target_checks import TargetCheck


def list_records(*, collection: str | None) -> tuple[list[dict[str, Any]], tuple[BadRecipe, ...]]:
    """One record per recipe of `collection` (all when None), then one per recipe file that
    cannot be read (its `error` set); and those files. Nothing is imported: the sources are
    read as files."""
    registry, bad = registry_with_errors()
    recipes = registry.in_collection(collection).recipes
    bad = tuple(b for b in bad if collection in (None, b.collection))
    search_path = command_search_path()
    checks = checks_per_recipe(recipes, search_path=search_path)
    records = [_list_record(recipe, checks[recipe], search_path=search_path) for recipe in recipes]
    records += [_bad_record(recipe) for recipe in bad]
    return records, bad


def _list_record(
    recipe: Recipe, checks: list[TargetCheck], *, search_path: list[str]
) -> dict[str, Any]:
    """`applies` is None when the fix's package is found nowhere (absent)."""
    record = recipe_metadata(recipe)
    absent = import_free_source_root(recipe, search_path=search_path) is None
    record["applies"] = None if absent else all(check.ok for check in checks)
    record["why_not"] = None if absent else _why_not(checks)
    record["problems"] = [f"{check.target}: {check.reason}" for check in checks if not check.ok]
    record["error"] = None
    return record


def _why_not(checks: list[TargetCheck]) -> str | None:
    """Why a revert does not apply: `out-of-range` (the installed version is outside its
    applies_to), `stale` (its match text is not in the code), `error`; None: it applies."""
    statuses = {check.status for check in checks if not check.ok}
    for status, word in (
        ("error", "error"),
        ("stale", "stale"),
        ("not-applicable", "out-of-range"),
    ):
        if status in statuses:
            return word
    return None


def _bad_record(recipe: BadRecipe) -> dict[str, Any]:
    """A recipe file that cannot be read: the keys of a recipe, null, and its `error`."""
    record: dict[str, Any] = dict.fromkeys(_RECORD_KEYS)
    record |= {"pr": recipe.pr, "collection": recipe.collection, "file": str(recipe.path)}
    record |= {"acts_at_capture": False, "targets": [], "problems": [], "error": recipe.error}
    record |= {"names": [], "partial": False, "not_reverted": [], "guards": []}
    record |= {"added_modules": []}
    return record


_RECORD_KEYS = (
    "pr",
    "collection",
    *DESCRIPTION_KEYS,
    "file",
    "acts_at_capture",
    "targets",
    "names",
    "partial",
    "not_reverted",
    "guards",
    "added_modules",
    "applies",
    "why_not",
    "problems",
    "error",
)

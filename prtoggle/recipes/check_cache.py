"""Check results kept between commands: a recipe's checks against a folder, while its files stay.

`list` and `run`'s pre-check check recipes against the installed code (a full parse of
each target module: sglang's are thousands of lines). The checks of one recipe against one
directory tree are kept in the user cache (recipes/recipe_cache.py, file kind `checks`,
named after the source of recipes/ and patching/) with every path the tree's answers
depended on (the files read or looked for, the folder listed for metadata:
SourceTree.consulted) and that path's identity (size, mtime_ns, inode, ctime_ns; absent).
They serve a later command only for the very same recipe (its whole parsed content)
against the same folder while every one of those paths is as it was; anything else is
checked again. Recipes with `names`/`not_reverted` entries (checked by finding modules on
sys.path) and trees whose answers cannot be accounted for are never kept.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from prtoggle.recipes import parsed_recipes, recipe_cache
from prtoggle.recipes.schema import Recipe
from prtoggle.recipes.target_checks import TargetCheck

__all__ = ["lookup", "store"]

_KIND = "checks"


def lookup(recipe: Recipe, root: Path) -> list[TargetCheck] | None:
    """`recipe`'s checks against the tree at `root` as an earlier command made them, where
    nothing they depended on has changed since; None where they must be made again."""
    if not _cacheable(recipe):
        return None
    entry = recipe_cache.cached_entry(_KIND, _key(recipe, root))
    if entry is None or entry.get("recipe") != _recipe_text(recipe):
        return None
    consulted = entry.get("consulted")
    if not isinstance(consulted, dict) or not consulted:
        return None
    for path, identity in consulted.items():
        if recipe_cache.file_identity(path) != identity:
            return None
    checks = entry.get("checks")
    if not isinstance(checks, list):
        return None
    try:
        return [TargetCheck(**fields) for fields in checks]
    except TypeError:  # not a mapping of TargetCheck's fields
        return None


def store(
    recipe: Recipe, root: Path, checks: Sequence[TargetCheck], consulted: set[str] | None
) -> None:
    """Keep `recipe`'s checks against `root`, made from the paths `consulted` (None: the
    tree could not account for what it read, and nothing is kept)."""
    if not consulted or not _cacheable(recipe):
        return
    identities = {path: recipe_cache.file_identity(path) for path in sorted(consulted)}
    recipe_cache.keep_entry(
        _KIND,
        _key(recipe, root),
        {
            "recipe": _recipe_text(recipe),
            "consulted": identities,
            "checks": [asdict(check) for check in checks],
        },
    )


def _cacheable(recipe: Recipe) -> bool:
    return not recipe.names and not recipe.not_reverted


def _key(recipe: Recipe, root: Path) -> str:
    return f"{recipe.collection}\0{recipe.pr}\0{root}"


def _recipe_text(recipe: Recipe) -> str:
    return json.dumps(parsed_recipes.encoded(recipe), sort_keys=True)

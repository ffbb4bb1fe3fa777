"""`check`: each chosen recipe's targets checked, on the imported code or on source trees."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prtoggle.commands.selections import load_default_registry, selected_recipes
from prtoggle.patching.source_files import SourceTree, open_source_tree
from prtoggle.recipes.check import TargetCheck, check_recipe
from prtoggle.recipes.resolution import (
    checks_by_import,
    command_search_path,
    refuse_tree_without_packages,
)


@dataclass(frozen=True)
class CheckRun:
    """What `check` found: every target's check, the trees' labels (none: the imported code)
    and how many recipes were checked."""

    checks: list[TargetCheck]
    tree_labels: list[str]
    fix_count: int


def check_recipes(
    prs: Sequence[int], *, source_roots: Sequence[Path], collection: str | None
) -> CheckRun:
    """The checks of PRS (default: every maintained recipe; with `collection`, its own).

    Without source roots the target modules are imported and checked as loaded; a source
    root that holds none of the recipes' packages is an error.
    """
    registry = load_default_registry(collection=collection)
    recipes = selected_recipes(registry if collection else registry.maintained(), prs)
    trees: list[SourceTree | None] = [open_source_tree(root) for root in source_roots] or [None]
    for tree in trees:
        if tree is not None:
            refuse_tree_without_packages(tree, recipes)
    if source_roots:
        checks = [
            check
            for tree in trees
            for recipe in recipes
            for check in check_recipe(recipe, tree=tree)
        ]
    else:
        found = checks_by_import(recipes, search_path=command_search_path())
        checks = [check for recipe in recipes for check in found[recipe]]
    labels = [tree.label for tree in trees if tree is not None]
    return CheckRun(checks, labels, len(recipes))


def check_failed(checks: Sequence[TargetCheck], *, strict: bool) -> bool:
    """Stale or error; absent too when strict (--strict, or PRs named) or when every
    target is absent: a check that found nothing to check never passes."""
    absent = [check.status == "absent" for check in checks]
    if any(check.failed for check in checks) or (strict and any(absent)):
        return True
    return bool(checks) and all(absent)

"""Where a recipe's package lives, found without importing it, and recipes checked there."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prtoggle.recipes.check import TargetCheck
    from prtoggle.recipes.schema import Recipe


def import_free_source_root(fix: Recipe, *, search_path: Sequence[str] = ()) -> Path | None:
    """The directory holding the top-level package of the fix's targets, found without import.

    Lets `list`, `show` and `bisect` read target sources as files, so they never import the
    patched code (nor torch). `search_path`: more directories to look in when this process
    cannot find the package (e.g. where a child will find it). None when it is not found.
    """
    top_levels = set(fix.top_levels)  # patch targets and names scopes
    roots = {package_root(name, search_path=search_path) for name in sorted(top_levels)}
    if len(roots) != 1 or None in roots:
        return None
    return roots.pop()


def refuse_absent_packages(fix: Recipe) -> None:
    """Raise when a target's top-level package is not installed here (absent)."""
    from prtoggle.errors import TargetResolutionError

    top_levels = set(fix.top_levels)  # patch targets and names scopes
    absent = sorted(name for name in top_levels if importlib.util.find_spec(name) is None)
    if absent:
        raise TargetResolutionError(
            f"PR {fix.pr} ({fix.collection}): package {', '.join(absent)} is not installed "
            "here, so there is no source to diff; `prtoggle check --source-root DIR` reads "
            "a source tree instead"
        )


def check_without_import(
    fixes: Iterable[Recipe], *, search_path: Sequence[str] = ()
) -> dict[int, list[TargetCheck]]:
    """check_fix for each fix against the source files of its package, per PR.

    The checks of a PR's fixes in several collections are listed together. A fix whose
    package cannot be found is `absent` on every target.
    """
    results: dict[int, list[TargetCheck]] = {}
    for fix, checks in checks_per_fix(fixes, search_path=search_path).items():
        results.setdefault(fix.pr, []).extend(checks)
    return results


def checks_per_fix(
    fixes: Iterable[Recipe], *, search_path: Sequence[str] = ()
) -> dict[Recipe, list[TargetCheck]]:
    """check_fix for each fix against its package's files (absent when not found)."""
    from prtoggle.patching.source_files import open_source_tree
    from prtoggle.recipes.check import TargetCheck, check_fix

    results: dict[Recipe, list[TargetCheck]] = {}
    for fix in fixes:
        root = import_free_source_root(fix, search_path=search_path)
        if root is None:
            results[fix] = [
                TargetCheck(
                    pr=fix.pr,
                    target=patch.target,
                    ok=False,
                    message=f"package of {patch.target} not found on sys.path",
                    status="absent",
                    collection=fix.collection,
                )
                for patch in fix.patches
            ]
            continue
        results[fix] = check_fix(fix, tree=open_source_tree(root))
    return results


def package_root(name: str, *, search_path: Sequence[str] = ()) -> Path | None:
    """The directory holding package `name`, found without importing it (None: absent)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None and search_path:
        spec = importlib.machinery.PathFinder.find_spec(name, list(search_path))
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).parent
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return Path(spec.origin).parent
    return None

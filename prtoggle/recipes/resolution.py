"""Where a recipe's targets live (installed, working directory, source root): one answer for all.

The rule every command and the runtime share (docs/recipes.md, "Where a target is found"):

1. A target's top-level package is looked for where the Python that runs it looks: first
   in the directories that Python puts before the installed packages (`python -c` and
   `-m`: the working directory; `python DIR/app.py`: DIR; `check`, `show` and `list`
   look in the working directory as `python -c` there would), then on this process's
   path (the installed packages, PYTHONPATH). A namespace folder does not hide a regular
   package found later, as in Python.
2. With `--source-root`, the tree is the only place looked in, and a tree that holds
   none of the checked packages is an error, never a passing check.
3. Inside a package, the target's module is the longest dotted prefix that is a module
   file, and a name the module imports (`from pkg.new import f`, an `__init__`
   re-export) is followed where it is defined (patching.source_tree), as attribute
   access follows it at run time.

The runtime (`reverted()`, a child's start-up hook) resolves by importing, which is rule 1
and 3 by definition; the static readers here are checked against it (tests/reliability/
test_one_resolution.py).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from prtoggle.errors import TargetResolutionError

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

    from prtoggle.patching.source_files import SourceTree
    from prtoggle.recipes.check import TargetCheck
    from prtoggle.recipes.schema import Recipe

NEARBY_DEPTH = 3
"""How many folders below a `--source-root` are searched for the folder it should name."""
NEARBY_FOLDERS = 2000
"""At most this many folders are looked at for that hint."""


def command_search_path(command: Sequence[str] | None = None) -> list[str]:
    """The directories a Python process of COMMAND looks in before the installed packages.

    The working directory (`python -c`, `python -m` and a test suite run from its root
    put it first) and the directory of each `.py` script COMMAND names (a script's own
    directory comes first on its path). Without a command (`check`, `show`, `list`): the
    working directory, as `python -c` run there would look.
    """
    scripts = [
        str(Path(arg).resolve().parent) for arg in (command or ())[1:] if arg.endswith(".py")
    ]
    return list(dict.fromkeys([os.getcwd(), *scripts]))


def package_root(name: str, *, search_path: Sequence[str] = ()) -> Path | None:
    """The directory holding top-level package `name`, found without importing it.

    `search_path` comes first (a namespace folder there does not hide a regular package
    installed), then this process's path. None: absent.
    """
    first = _find_spec(name, search_path) if search_path else None
    spec = first if first is not None and not _is_namespace(first) else None
    if spec is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
    spec = spec or first
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).parent
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return Path(spec.origin).parent
    return None


def import_free_source_root(recipe: Recipe, *, search_path: Sequence[str] = ()) -> Path | None:
    """The directory holding the top-level package of the fix's targets, found without import.

    Lets `list`, `show`, `run` and `bisect` read target sources as files, so they never
    import the patched code (nor torch). None when a package is absent, or when the
    targets' packages live in different directories.
    """
    roots = {package_root(name, search_path=search_path) for name in _top_levels(recipe)}
    if len(roots) != 1 or None in roots:
        return None
    return roots.pop()


def absent_reason(recipe: Recipe, *, search_path: Sequence[str] = ()) -> str | None:
    """Why a target package of `fix` is absent (where it was looked for); None: all found."""
    absent = [
        name for name in _top_levels(recipe) if package_root(name, search_path=search_path) is None
    ]
    if not absent:
        return None
    return _absent_text(absent, search_path)


def refuse_absent_packages(recipe: Recipe, *, search_path: Sequence[str] = ()) -> None:
    """Raise when a target's top-level package is found neither installed nor in `search_path`."""
    reason = absent_reason(recipe, search_path=search_path)
    if reason is not None:
        raise TargetResolutionError(
            f"PR {recipe.pr} ({recipe.collection}): {reason}, so there is no source to diff; "
            "`prtoggle check --source-root DIR` reads a source tree instead"
        )


def check_without_import(
    recipes: Iterable[Recipe], *, search_path: Sequence[str] = ()
) -> dict[int, list[TargetCheck]]:
    """check_recipe for each fix against the source files of its package, per PR.

    The checks of a PR's fixes in several collections are listed together. A fix whose
    package cannot be found is `absent` on every target.
    """
    results: dict[int, list[TargetCheck]] = {}
    for fix, checks in checks_per_recipe(recipes, search_path=search_path).items():
        results.setdefault(fix.pr, []).extend(checks)
    return results


def checks_per_recipe(
    recipes: Iterable[Recipe], *, search_path: Sequence[str] = ()
) -> dict[Recipe, list[TargetCheck]]:
    """check_recipe for each fix against its package's files (absent when not found).

    The fixes whose packages lie in one directory share one tree: its files are parsed and
    its version is read once for all of them (the tree lives for this call only). A fix's
    checks an earlier command made against the same folder, none of whose files they read
    has changed since, are taken from the user cache (recipes/check_cache.py).
    """
    from prtoggle.recipes import check_cache, recipe_cache

    trees: dict[Path, SourceTree] = {}
    results: dict[Recipe, list[TargetCheck]] = {}
    for fix in recipes:
        root = import_free_source_root(fix, search_path=search_path)
        if root is None:
            reason = absent_reason(fix, search_path=search_path)
            results[fix] = _absent_checks(fix, reason or "its packages lie in several places")
            continue
        cached = check_cache.lookup(fix, root)
        if cached is not None:
            results[fix] = cached
            continue
        from prtoggle.patching.source_files import open_source_tree
        from prtoggle.recipes.check import check_recipe

        if root not in trees:
            trees[root] = open_source_tree(root)
        results[fix] = check_recipe(fix, tree=trees[root])
        check_cache.store(fix, root, results[fix], trees[root].consulted)
    recipe_cache.flush()
    return results


def checks_by_import(
    recipes: Iterable[Recipe], *, search_path: Sequence[str] = ()
) -> dict[Recipe, list[TargetCheck]]:
    """check_recipe for each fix with its modules imported, as the runtime finds them.

    A package found only in `search_path` is imported from there (the directory put first
    on sys.path while it is checked, as the command's Python has it); one found nowhere
    is `absent`, naming where it was looked for.
    """
    from prtoggle.recipes.check import check_recipe

    results: dict[Recipe, list[TargetCheck]] = {}
    for fix in recipes:
        reason = absent_reason(fix, search_path=search_path)
        if reason is not None:
            results[fix] = _absent_checks(fix, reason)
            continue
        with _importable(fix, search_path=search_path):
            results[fix] = check_recipe(fix)
    return results


def refuse_tree_without_packages(tree: SourceTree, recipes: Sequence[Recipe]) -> None:
    """Raise when `tree` holds none of the top-level packages the `fixes` patch.

    Names the folder below the tree that holds them, when one does (a checkout's root
    given instead of its `python/`, a package's own folder instead of its parent).
    """
    packages = sorted({name for fix in recipes for name in _top_levels(fix)})
    if not packages or any(tree.has_package(name) for name in packages):
        return
    names = ", ".join(f"{name}/" for name in packages)
    nearby = _nearby_root(tree.path, packages) if tree.path.is_dir() else None
    todo = (
        f"did you mean {nearby}?"
        if nearby is not None
        else "expected the folder that holds the package (a checkout's python/ or src/), a "
        "wheel or an sdist"
    )
    raise TargetResolutionError(f"--source-root {tree.label} holds no {names}; {todo}")


@contextmanager
def _importable(recipe: Recipe, *, search_path: Sequence[str]) -> Iterator[None]:
    """sys.path with the `search_path` directories that hold the fix's packages first."""
    wanted = [str(path) for path in search_path]
    roots = {str(package_root(name, search_path=search_path)) for name in _top_levels(recipe)}
    saved = list(sys.path)
    sys.path[:0] = [directory for directory in wanted if directory in roots]
    try:
        yield
    finally:
        sys.path[:] = saved


def _absent_checks(recipe: Recipe, reason: str) -> list[TargetCheck]:
    from prtoggle.recipes.check import TargetCheck

    return [
        TargetCheck(
            pr=recipe.pr,
            target=patch.target,
            ok=False,
            message=reason,
            status="absent",
            collection=recipe.collection,
        )
        for patch in recipe.patches
    ]


def _absent_text(absent: Sequence[str], search_path: Sequence[str]) -> str:
    names = ", ".join(absent)
    noun = "package" if len(absent) == 1 else "packages"
    verb = "is" if len(absent) == 1 else "are"
    where = f", nor in {', '.join(search_path)}" if search_path else ""
    return f"{noun} {names} {verb} not installed here{where}"


def _top_levels(recipe: Recipe) -> list[str]:
    return sorted(set(recipe.top_levels))  # patch targets and names scopes


def _find_spec(name: str, search_path: Sequence[str]) -> ModuleSpec | None:
    try:
        return importlib.machinery.PathFinder.find_spec(name, list(search_path))
    except (ImportError, ValueError):
        return None


def _is_namespace(spec: ModuleSpec) -> bool:
    return spec.origin is None and spec.submodule_search_locations is not None


def _nearby_root(path: Path, packages: Sequence[str]) -> Path | None:
    """The folder at or near `path` that holds one of `packages` (regular packages only)."""
    if path.resolve().name in packages and (path / "__init__.py").is_file():
        return Path(os.path.normpath(path / ".."))
    level, seen = [path], 0
    for _ in range(NEARBY_DEPTH):
        below: list[Path] = []
        for folder in level:
            try:
                children = sorted(p for p in folder.iterdir() if p.is_dir())
            except OSError:
                continue
            for child in children:
                if child.name.startswith(".") or seen >= NEARBY_FOLDERS:
                    continue
                seen += 1
                if any(_holds(child, name) for name in packages):
                    return child
                below.append(child)
        level = below
    return None


def _holds(folder: Path, package: str) -> bool:
    return (folder / package / "__init__.py").is_file() or (folder / f"{package}.py").is_file()

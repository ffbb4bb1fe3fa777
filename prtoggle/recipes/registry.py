"""The registry: recipe collections, one per directory, and lookup of fixes by PR number.

Every recipe directory is a collection named after the directory: the shipped ones are
the subdirectories of `yaml/` (`fixes`, `sglang`, ...), then each PRTOGGLE_YAML_PATH
directory. A PR number is unique within a collection; the same number may appear in
several collections (sglang's own recipe for 27460 next to the demo engine's).
"""

from __future__ import annotations

import datetime
import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prtoggle.errors import RegistryError, UnknownPRError
from prtoggle.patching.types import Edit, Patch
from prtoggle.recipes.prs import join_prs
from prtoggle.recipes.schema import MAX_PR, MAX_RECIPE_BYTES, MIN_PR, SYMPTOMS, Recipe, load_recipe
from prtoggle.recipes.yaml_reading import read_recipe_text

__all__ = [
    "MAX_PR",
    "MAX_RECIPE_BYTES",
    "MIN_PR",
    "SYMPTOMS",
    "YAML_PATH_ENV",
    "Edit",
    "Patch",
    "Recipe",
    "Registry",
    "default_registry",
    "load_recipe",
    "load_registry",
    "shipped_collection_dirs",
    "shipped_yaml_dir",
    "yaml_dirs_from_env",
]

YAML_PATH_ENV = "PRTOGGLE_YAML_PATH"


@dataclass(frozen=True)
class Registry:
    """Every fix of every collection, in collection order, then by PR number.

    `dirs` holds one directory per collection; the collection's name is the directory's.
    """

    fixes: tuple[Recipe, ...]
    dirs: tuple[Path, ...]

    def collections(self) -> tuple[str, ...]:
        """The collection names, in load order (shipped first)."""
        return tuple(directory.name for directory in self.dirs)

    def prs(self) -> tuple[int, ...]:
        """The distinct PR numbers of every collection, ascending."""
        return tuple(sorted({fix.pr for fix in self.fixes}))

    def find(self, pr: int, *, collection: str | None = None) -> tuple[Recipe, ...]:
        """Every fix numbered `pr` (in `collection` only, when given); none is an error."""
        scope = self.in_collection(collection)
        found = tuple(fix for fix in scope.fixes if fix.pr == pr)
        if found:
            return found
        if collection is None:
            raise UnknownPRError(
                f"PR {pr} is not registered; registered PRs: {join_prs(self.prs())} "
                f"(registry directories: {', '.join(str(d) for d in self.dirs)})"
            )
        elsewhere = [fix.collection for fix in self.fixes if fix.pr == pr]
        hint = f"; PR {pr} is in: {', '.join(elsewhere)}" if elsewhere else ""
        raise UnknownPRError(
            f"PR {pr} is not in collection {collection!r}; its PRs: {join_prs(scope.prs())}{hint}"
        )

    def get(self, pr: int, *, collection: str | None = None) -> Recipe:
        """The one fix numbered `pr`; a number in several collections needs `collection`."""
        found = self.find(pr, collection=collection)
        if len(found) > 1:
            choices = ", ".join(f"{fix.collection} ({fix.path})" for fix in found)
            raise UnknownPRError(
                f"PR {pr} is in {len(found)} collections: {choices}; choose one with "
                f"--collection {' or --collection '.join(fix.collection for fix in found)}"
            )
        return found[0]

    def in_collection(self, collection: str | None) -> Registry:
        """The registry restricted to one collection (itself for None); unknown is an error."""
        if collection is None:
            return self
        for directory in self.dirs:
            if directory.name == collection:
                kept = tuple(fix for fix in self.fixes if fix.collection == collection)
                return Registry(fixes=kept, dirs=(directory,))
        raise UnknownPRError(
            f"no recipe collection named {collection!r}; collections: "
            f"{', '.join(f'{d.name} ({d})' for d in self.dirs) or '(none)'}"
        )

    def by_merge_date(self) -> tuple[Recipe, ...]:
        """Fixes oldest first; fixes without a merge date last, then by PR and collection."""
        order = {name: index for index, name in enumerate(self.collections())}
        return tuple(
            sorted(
                self.fixes,
                key=lambda fix: (
                    fix.merged is None,
                    fix.merged or datetime.date.min,
                    fix.pr,
                    order[fix.collection],
                ),
            )
        )


def shipped_yaml_dir() -> Path:
    """The folder of shipped collections: inside the wheel, or `yaml/` of a source checkout."""
    package_dir = Path(__file__).resolve().parent.parent
    installed = package_dir / "_shipped_yaml"
    return installed if installed.is_dir() else package_dir.parent / "yaml"


def shipped_collection_dirs() -> tuple[Path, ...]:
    """The shipped collections: every subdirectory of shipped_yaml_dir(), by name."""
    root = shipped_yaml_dir()
    if not root.is_dir():
        return ()
    return tuple(
        sorted(
            child
            for child in root.iterdir()
            if child.is_dir() and not child.name.startswith((".", "_"))
        )
    )


def yaml_dirs_from_env(value: str | None) -> tuple[Path, ...]:
    """The shipped collections, then the PRTOGGLE_YAML_PATH directories (os.pathsep)."""
    extra = [
        Path(os.path.abspath(part)) for part in (value or "").split(os.pathsep) if part.strip()
    ]
    return (*shipped_collection_dirs(), *extra)


def load_registry(*, dirs: Sequence[Path] | None = None) -> Registry:
    """Load every `*.yaml` / `*.yml` of `dirs` (None: shipped + env), one collection each."""
    chosen = tuple(dirs) if dirs is not None else yaml_dirs_from_env(os.environ.get(YAML_PATH_ENV))
    fixes: list[Recipe] = []
    named: dict[str, Path] = {}
    kept: list[Path] = []
    for directory in chosen:
        if any(directory.resolve() == seen.resolve() for seen in kept):
            continue  # the same directory twice (`yaml/fixes` on the path): one collection
        if not directory.is_dir():
            raise RegistryError(
                f"registry directory {directory} does not exist or is not a directory "
                f"(registry directories: {', '.join(str(d) for d in chosen)}; "
                f"extra ones come from {YAML_PATH_ENV})"
            )
        if directory.name in named:
            raise RegistryError(
                f"two recipe collections are named {directory.name!r}: {named[directory.name]} "
                f"and {directory}; a collection is named after its directory, rename one"
            )
        named[directory.name] = directory
        kept.append(directory)
        fixes.extend(_load_collection(directory))
    return Registry(fixes=tuple(fixes), dirs=tuple(kept))


def default_registry() -> Registry:
    """The registry of the shipped collections and PRTOGGLE_YAML_PATH (cached per value)."""
    return _cached_registry(os.environ.get(YAML_PATH_ENV, ""))


def clear_registry_cache() -> None:
    """Forget the registries default_registry() loaded: the next call reads the files again."""
    _cached_registry.cache_clear()


@functools.lru_cache(maxsize=8)
def _cached_registry(yaml_path: str) -> Registry:
    return load_registry(dirs=yaml_dirs_from_env(yaml_path))


def _load_collection(directory: Path) -> list[Recipe]:
    by_pr: dict[int, Recipe] = {}
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        _refuse_link_out(path, directory)
        fix = load_recipe(path, collection=directory.name)
        if fix.pr in by_pr:
            other = by_pr[fix.pr].path
            raise RegistryError(
                f"duplicate PR {fix.pr} in collection {directory.name!r}: defined in "
                f"{other}:{_pr_line(other)} and in {path}:{_pr_line(path)}"
            )
        by_pr[fix.pr] = fix
    return [by_pr[pr] for pr in sorted(by_pr)]


def _refuse_link_out(path: Path, directory: Path) -> None:
    """A recipe that is a symlink to a file outside its collection is refused, unread."""
    target = path.resolve()
    if not target.is_relative_to(directory.resolve()):
        raise RegistryError(
            f"{path}: is a symlink to {target}, outside its collection {directory}; refused "
            "without reading it (recipes are code prtoggle compiles: keep each one inside "
            "its collection directory)"
        )


def _pr_line(path: Path) -> int:
    """The line of the top-level `pr:` key (files were already parsed successfully)."""
    for number, line in enumerate(read_recipe_text(path).splitlines(), start=1):
        if re.match(r"pr\s*:", line):
            return number
    return 1

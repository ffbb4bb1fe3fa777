"""The registry: recipe collections, one per directory, and lookup of fixes by PR number.

Every recipe directory is a collection named after the directory: the shipped ones are
the subdirectories of `yaml/` (`fixes`, `sglang`, ...), then each PRTOGGLE_YAML_PATH
directory. A PR number is unique within a collection; the same number may appear in
several collections (sglang's own recipe for 27460 next to the demo engine's).

When sglang is installed, the recipes it registers in its own
`sglang/srt/debug_utils/pr_fix_toggle.py` are one more collection, `sglang-upstream`,
read from that file (parsed, never imported) with no setup step; PRTOGGLE_SGLANG_UPSTREAM=0
leaves it out. Which of a PR's recipes a revert uses is prtoggle.recipes.selection's rule.
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prtoggle.errors import RegistryError, UnknownPRError
from prtoggle.patching.types import Edit, Patch
from prtoggle.protocol import YAML_PATH_ENV
from prtoggle.recipes import parsed_recipes, recipe_cache
from prtoggle.recipes.prs import join_prs
from prtoggle.recipes.schema import (
    MAX_PR,
    MAX_RECIPE_BYTES,
    MIN_PR,
    SYMPTOMS,
    Recipe,
    load_recipe,
    load_recipe_text,
)
from prtoggle.recipes.yaml_reading import read_recipe_text

__all__ = [
    "MAX_PR",
    "MAX_RECIPE_BYTES",
    "MIN_PR",
    "SYMPTOMS",
    "UPSTREAM_COLLECTION",
    "UPSTREAM_ENV",
    "YAML_PATH_ENV",
    "BadRecipe",
    "Edit",
    "Patch",
    "Recipe",
    "Registry",
    "default_registry",
    "load_recipe",
    "load_registry",
    "registry_with_errors",
    "shipped_collection_dirs",
    "shipped_yaml_dir",
    "yaml_dirs_from_env",
]

UPSTREAM_COLLECTION = "sglang-upstream"
"""The built-in collection: the installed sglang's own registered recipes."""
UPSTREAM_ENV = "PRTOGGLE_SGLANG_UPSTREAM"
"""`0` leaves the built-in collection out (default: in, when sglang is installed)."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BadRecipe:
    """A recipe file that cannot be read as a recipe: where, and the one-line error."""

    path: Path
    collection: str
    error: str

    @property
    def pr(self) -> int | None:
        """The PR its file is named after, if it is."""
        stem = self.path.stem
        return int(stem) if stem.isascii() and stem.isdigit() else None


@dataclass(frozen=True)
class Registry:
    """Every fix of every collection, in collection order, then by PR number.

    `dirs` holds one directory per collection; the collection's name is the directory's.
    `builtin` holds the built-in collections: (name, the file their recipes are read from).
    """

    recipes: tuple[Recipe, ...]
    dirs: tuple[Path, ...]
    builtin: tuple[tuple[str, Path], ...] = ()

    def collections(self) -> tuple[str, ...]:
        """The collection names, in load order (shipped, PRTOGGLE_YAML_PATH, built-in)."""
        return tuple(name for name, _ in self.sources())

    def sources(self) -> tuple[tuple[str, Path], ...]:
        """(collection name, its directory or file), in load order."""
        return (*((directory.name, directory) for directory in self.dirs), *self.builtin)

    def is_upstream(self, collection: str) -> bool:
        """Whether `collection` holds sglang's own text, not recipes we maintain.

        The built-in collection, or a directory named like it (`import-sglang --out
        sglang-upstream`).
        """
        return collection == UPSTREAM_COLLECTION or any(
            name == collection for name, _ in self.builtin
        )

    def prs(self) -> tuple[int, ...]:
        """The distinct PR numbers of every collection, ascending."""
        return tuple(sorted({fix.pr for fix in self.recipes}))

    def find(self, pr: int, *, collection: str | None = None) -> tuple[Recipe, ...]:
        """Every fix numbered `pr` (in `collection` only, when given); none is an error."""
        scope = self.in_collection(collection)
        found = tuple(fix for fix in scope.recipes if fix.pr == pr)
        if found:
            return found
        if collection is None:
            raise UnknownPRError(
                f"PR {pr} is not registered; registered PRs: {join_prs(self.prs())} "
                f"(registry directories: {', '.join(str(d) for _, d in self.sources())})"
            )
        elsewhere = [fix.collection for fix in self.recipes if fix.pr == pr]
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
        if collection in self.collections():
            kept = tuple(fix for fix in self.recipes if fix.collection == collection)
            dirs = tuple(d for d in self.dirs if d.name == collection)
            builtin = tuple(b for b in self.builtin if b[0] == collection)
            return Registry(recipes=kept, dirs=dirs, builtin=builtin)
        raise UnknownPRError(
            f"no recipe collection named {collection!r}; collections: "
            f"{', '.join(f'{name} ({where})' for name, where in self.sources()) or '(none)'}"
        )

    def maintained(self) -> Registry:
        """The registry without upstream-text collections (sglang's own, see is_upstream)."""
        kept = tuple(fix for fix in self.recipes if not self.is_upstream(fix.collection))
        dirs = tuple(d for d in self.dirs if not self.is_upstream(d.name))
        return Registry(recipes=kept, dirs=dirs)

    def only(self, recipes: Sequence[Recipe]) -> Registry:
        """The registry holding just `fixes` (the recipes a revert request selected)."""
        return Registry(recipes=tuple(recipes), dirs=self.dirs, builtin=self.builtin)

    def by_merge_date(self) -> tuple[Recipe, ...]:
        """Fixes oldest first; fixes without a merge date last, then by PR and collection."""
        order = {name: index for index, name in enumerate(self.collections())}
        return tuple(
            sorted(
                self.recipes,
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


def load_registry(
    *,
    dirs: Sequence[Path] | None = None,
    upstream: Path | None = None,
    bad: list[BadRecipe] | None = None,
) -> Registry:
    """Load every `*.yaml` / `*.yml` of `dirs` (None: shipped + env), one collection each.

    `upstream`: an sglang `pr_fix_toggle.py` whose registered recipes become the built-in
    collection `sglang-upstream` (after the directories), unless a directory of that name
    (an `import-sglang --out sglang-upstream`) is the collection already. `bad`: a file
    that cannot be read as a recipe is left out and added there instead of raising.
    """
    try:
        return _load_registry(dirs=dirs, upstream=upstream, bad=bad)
    finally:
        recipe_cache.flush()  # what was parsed here, for the next command


def default_registry() -> Registry:
    """The shipped collections, PRTOGGLE_YAML_PATH, then the installed sglang's own recipes.

    Cached per PRTOGGLE_YAML_PATH value and sglang file. sglang's file that cannot be read
    as a recipe registry leaves the built-in collection out, with a warning naming why.
    """
    return _cached_registry(os.environ.get(YAML_PATH_ENV, ""), _upstream_file())


def registry_with_errors() -> tuple[Registry, tuple[BadRecipe, ...]]:
    """default_registry(); where recipe files cannot be read, the registry without them and
    their errors (what `list` shows), instead of the first error."""
    try:
        return default_registry(), ()
    except RegistryError:
        pass
    from prtoggle.recipes.from_sglang import SglangImportError

    dirs, upstream = yaml_dirs_from_env(os.environ.get(YAML_PATH_ENV)), _upstream_file()
    bad: list[BadRecipe] = []
    try:
        return load_registry(dirs=dirs, upstream=upstream, bad=bad), tuple(bad)
    except (SglangImportError, RegistryError) as exc:
        if upstream is None or not _from_upstream(exc, upstream):
            raise
    bad.clear()  # sglang's own file unreadable: left out, as default_registry() does
    return load_registry(dirs=dirs, bad=bad), tuple(bad)


def clear_registry_cache() -> None:
    """Forget the registries default_registry() loaded: the next call reads the files again."""
    _cached_registry.cache_clear()


@functools.lru_cache(maxsize=8)
def _cached_registry(yaml_path: str, upstream: Path | None) -> Registry:
    from prtoggle.recipes.from_sglang import SglangImportError

    dirs = yaml_dirs_from_env(yaml_path)
    try:
        return load_registry(dirs=dirs, upstream=upstream)
    except (SglangImportError, RegistryError) as exc:
        if upstream is None or not _from_upstream(exc, upstream):
            raise
        logger.warning("collection %s left out: %s", UPSTREAM_COLLECTION, exc)
        return load_registry(dirs=dirs)


def _upstream_file() -> Path | None:
    if os.environ.get(UPSTREAM_ENV, "").strip() == "0":
        return None
    from prtoggle.recipes.from_sglang import find_toggle_module

    return find_toggle_module()


def _from_upstream(exc: Exception, upstream: Path) -> bool:
    return str(exc).startswith(str(upstream))


def _load_registry(
    *, dirs: Sequence[Path] | None, upstream: Path | None, bad: list[BadRecipe] | None
) -> Registry:
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
        fixes.extend(_load_collection(directory, bad=bad))
    if upstream is None:
        return Registry(recipes=tuple(fixes), dirs=tuple(kept))
    if UPSTREAM_COLLECTION in named:
        # `prtoggle import-sglang --out sglang-upstream` on PRTOGGLE_YAML_PATH: the files
        # the user imported are that collection; the built-in one steps aside.
        logger.info(
            "collection %s: the directory %s, not %s",
            UPSTREAM_COLLECTION,
            named[UPSTREAM_COLLECTION],
            upstream,
        )
        return Registry(recipes=tuple(fixes), dirs=tuple(kept))
    fixes.extend(_upstream_recipes(upstream))
    return Registry(
        recipes=tuple(fixes), dirs=tuple(kept), builtin=((UPSTREAM_COLLECTION, upstream),)
    )


def _load_collection(directory: Path, *, bad: list[BadRecipe] | None = None) -> list[Recipe]:
    by_pr: dict[int, Recipe] = {}
    for path in _recipe_paths(directory):
        try:
            _refuse_link_out(path, directory)
            fix = _recipe_file(path, collection=directory.name)
        except RegistryError as exc:
            if bad is None:
                raise
            bad.append(BadRecipe(path, directory.name, str(exc)))
            continue
        if fix.pr in by_pr:
            other = by_pr[fix.pr].path
            raise RegistryError(
                f"duplicate PR {fix.pr} in collection {directory.name!r}: defined in "
                f"{other}:{_pr_line(other)} and in {path}:{_pr_line(path)}"
            )
        by_pr[fix.pr] = fix
    return [by_pr[pr] for pr in sorted(by_pr)]


def _recipe_paths(directory: Path) -> list[Path]:
    """The `*.yaml` / `*.yml` entries of `directory`, by name; a listing that fails is an
    error naming the directory (Path.glob would quietly find nothing)."""
    try:
        with os.scandir(directory) as entries:
            names = [entry.name for entry in entries]
    except OSError as exc:
        raise RegistryError(
            f"registry directory {directory} cannot be read: {exc.strerror or exc}; a "
            f"registry directory (shipped, or from {YAML_PATH_ENV}) must be a readable "
            "directory of recipe files"
        ) from exc
    return sorted(directory / name for name in names if name.endswith((".yaml", ".yml")))


def _recipe_file(path: Path, *, collection: str) -> Recipe:
    """load_recipe(path): the run's or the user cache's parsed recipe where it was parsed
    from this very text of this very file."""
    text = read_recipe_text(path)
    known = parsed_recipes.known(path, collection, text)
    if known is None:
        known = recipe_cache.lookup(path, collection, text)
    if known:
        fix = known[0]
    else:
        fix = load_recipe_text(text, path=path, collection=collection)
        recipe_cache.store(path, collection, text, (fix,))
    parsed_recipes.remember(path, collection, text, (fix,))
    return fix


def _upstream_recipes(path: Path) -> tuple[Recipe, ...]:
    """sglang's registered recipes of `path`, as from_sglang.upstream_recipes reads them;
    the run's parsed ones where they were parsed from this very text."""
    from prtoggle.recipes.from_sglang import upstream_recipes

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return upstream_recipes(path, collection=UPSTREAM_COLLECTION)  # it says what is wrong
    known = parsed_recipes.known(path, UPSTREAM_COLLECTION, text)
    if known is None:
        known = recipe_cache.lookup(path, UPSTREAM_COLLECTION, text)
    if known is None:
        known = upstream_recipes(path, collection=UPSTREAM_COLLECTION, text=text)
        recipe_cache.store(path, UPSTREAM_COLLECTION, text, known)
    parsed_recipes.remember(path, UPSTREAM_COLLECTION, text, known)
    return known


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

"""`import-sglang`: sglang's registered revert recipes, read (never imported), written as files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prtoggle.recipes.file_writing import replace_atomically, unsafe_destination
from prtoggle.recipes.from_sglang import (
    SglangImportError,
    SglangRecipe,
    installed_toggle_module,
    read_recipes,
    recipe_file_text,
)


@dataclass(frozen=True)
class WrittenRecipe:
    """One recipe file of an import and whether this import changed it."""

    pr: int
    path: Path
    changed: bool


def import_sglang_recipes(*, source: Path | None, out: Path) -> tuple[Path, list[WrittenRecipe]]:
    """The toggle module read (`source`, else the installed sglang's) and each recipe file
    written to `out` (unchanged ones left as they are)."""
    path = source if source is not None else installed_toggle_module()
    return path, write_recipes(read_recipes(path), out)


def write_recipes(recipes: list[SglangRecipe], out: Path) -> list[WrittenRecipe]:
    """Write `<out>/<PR>.yaml` per recipe, each atomically; a file already holding that text
    is left alone. A link or a special file of one of those names is refused before any
    file is written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SglangImportError(f"{out}: cannot create the output directory: {exc}") from exc
    paths = [out / f"{recipe.pr}.yaml" for recipe in recipes]
    for path in paths:
        _refuse_unsafe(path)
    written = []
    for recipe, path in zip(recipes, paths, strict=True):
        wanted = recipe_file_text(recipe)
        try:
            current = path.read_text(encoding="utf-8") if path.exists() else None
            if current != wanted:
                replace_atomically(path, wanted.encode("utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise SglangImportError(f"{path}: cannot write the recipe file: {exc}") from exc
        written.append(WrittenRecipe(pr=recipe.pr, path=path, changed=current != wanted))
    return written


def _refuse_unsafe(path: Path) -> None:
    """A SglangImportError where `path` is a link or a special file (nothing written)."""
    try:
        reason = unsafe_destination(path)
    except OSError as exc:
        raise SglangImportError(f"{path}: cannot write the recipe file: {exc}") from exc
    if reason is not None:
        raise SglangImportError(
            f"{path}: {reason}; nothing written; remove it or choose another --out"
        )

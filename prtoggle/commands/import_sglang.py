"""`import-sglang`: sglang's registered revert recipes, read (never imported), written as files."""

from __future__ import annotations

from pathlib import Path

from prtoggle.recipes.from_sglang import (
    WrittenRecipe,
    installed_toggle_module,
    read_recipes,
    write_recipes,
)


def import_sglang_recipes(*, source: Path | None, out: Path) -> tuple[Path, list[WrittenRecipe]]:
    """The toggle module read (`source`, else the installed sglang's) and each recipe file
    written to `out` (unchanged ones left as they are)."""
    path = source if source is not None else installed_toggle_module()
    return path, write_recipes(read_recipes(path), out)

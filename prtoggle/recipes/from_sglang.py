"""Read sglang's registered revert recipes from `pr_fix_toggle.py` (parsed, never imported)."""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prtoggle.errors import PrToggleError

if TYPE_CHECKING:
    from prtoggle.recipes.schema import Recipe

TOGGLE_MODULE_PATH = Path("sglang", "srt", "debug_utils", "pr_fix_toggle.py")
"""Where sglang keeps its recipe registry, relative to the directory holding `sglang/`."""
SGLANG_PULL_URL = "https://github.com/sgl-project/sglang/pull/{pr}"


class SglangImportError(PrToggleError):
    """sglang's pr_fix_toggle.py cannot be found or read as a recipe registry."""


@dataclass(frozen=True)
class SglangRecipe:
    """One recipe sglang registers: its PR number and its YAML text as sglang has it."""

    pr: int
    text: str
    line: int
    text_line: int = 1  # the file line the text starts on (its opening quotes)


def installed_toggle_module() -> Path:
    """The installed sglang's pr_fix_toggle.py, found without importing sglang.

    `find_spec` on the top-level package only locates it (no `__init__` runs).
    """
    found = find_toggle_module()
    if found is not None:
        return found
    locations = _sglang_locations()
    where = ", ".join(locations) if locations else "no package named 'sglang' is importable"
    raise SglangImportError(
        f"cannot find sglang's {TOGGLE_MODULE_PATH} (searched: {where}); install sglang or "
        "pass --from PATH/TO/pr_fix_toggle.py"
    )


def find_toggle_module() -> Path | None:
    """The installed sglang's pr_fix_toggle.py, None when sglang or the file is absent."""
    for location in _sglang_locations():
        candidate = Path(location, *TOGGLE_MODULE_PATH.parts[1:])
        if candidate.is_file():
            return candidate
    return None


def upstream_recipes(path: Path, *, collection: str, text: str | None = None) -> tuple[Recipe, ...]:
    """sglang's registered recipes of `path` as the Recipes of `collection` (no import).

    Cached by the file's path, modification time and size: the registry is loaded at the
    start of every process under `prtoggle run`. `text`: the file's text as the caller
    read it, parsed as given.
    """
    if text is not None:
        return _recipes_of_text(text, path, collection)
    try:
        stat = path.stat()
    except OSError as exc:
        raise SglangImportError(f"{path}: cannot read sglang's recipe module: {exc}") from exc
    return _cached_upstream(str(path), stat.st_mtime_ns, stat.st_size, collection)


def read_recipes(path: Path) -> list[SglangRecipe]:
    """Parse `path` and return the recipes of its `{PR: YAML_TEXT_NAME}` registry dict.

    The registry is the module-level dict whose keys are PR numbers and whose values
    name module-level string constants (or are string literals).
    """
    return _registrations(_module_text(path), path)


def _registrations(text: str, path: Path) -> list[SglangRecipe]:
    """read_recipes of `text`, the text of `path`."""
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise SglangImportError(
            f"{path}:{exc.lineno}: not valid Python ({exc.msg}); expected sglang's pr_fix_toggle.py"
        ) from exc
    strings = _string_constants(tree)
    registries = [node for node in _module_dicts(tree) if _looks_like_registry(node)]
    if not registries:
        raise SglangImportError(
            f"{path}: no recipe registrations found; expected a module-level dict "
            "{PR_NUMBER: YAML_TEXT, ...} such as sglang's _PR_FIX_REVERT_YAML"
        )
    recipes: dict[int, SglangRecipe] = {}
    for registry in registries:
        for key, value in zip(registry.keys, registry.values, strict=True):
            recipe = _recipe(path, key, value, strings)
            if recipe.pr in recipes:
                raise SglangImportError(
                    f"{path}:{recipe.line}: PR {recipe.pr} is registered twice "
                    f"(first at line {recipes[recipe.pr].line})"
                )
            recipes[recipe.pr] = recipe
    return [recipes[pr] for pr in sorted(recipes)]


def recipe_file_text(recipe: SglangRecipe) -> str:
    """sglang's YAML text unchanged, after the `pr`/`title`/`url` keys prtoggle lists."""
    header = (
        "# Imported by `prtoggle import-sglang` from sglang/srt/debug_utils/pr_fix_toggle.py;\n"
        "# the text after these keys is sglang's, unchanged.\n"
        f"pr: {recipe.pr}\n"
        f"title: sglang's revert recipe for PR {recipe.pr}\n"
        f"url: {SGLANG_PULL_URL.format(pr=recipe.pr)}\n"
    )
    body = recipe.text if recipe.text.endswith("\n") else f"{recipe.text}\n"
    return header + body


@functools.lru_cache(maxsize=4)
def _cached_upstream(path: str, mtime_ns: int, size: int, collection: str) -> tuple[Recipe, ...]:
    del mtime_ns, size  # the cache key only
    return _recipes_of_text(_module_text(Path(path)), Path(path), collection)


def _recipes_of_text(text: str, path: Path, collection: str) -> tuple[Recipe, ...]:
    from prtoggle.recipes.schema import load_recipe_text

    return tuple(
        load_recipe_text(_text_at_file_lines(recipe), path=path, collection=collection)
        for recipe in _registrations(text, path)
    )


def _module_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SglangImportError(f"{path}: cannot read sglang's recipe module: {exc}") from exc


def _text_at_file_lines(recipe: SglangRecipe) -> str:
    """sglang's text on the lines it has in the file, then the keys prtoggle lists.

    Errors and edits then name `pr_fix_toggle.py:LINE` as the file has it.
    """
    keys = (
        f"pr: {recipe.pr}\ntitle: sglang's revert recipe for PR {recipe.pr}\n"
        f"url: {SGLANG_PULL_URL.format(pr=recipe.pr)}\n"
    )
    body = recipe.text if recipe.text.endswith("\n") else f"{recipe.text}\n"
    return "\n" * (recipe.text_line - 1) + body + keys


def _sglang_locations() -> list[str]:
    try:
        spec = importlib.util.find_spec("sglang")
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def _string_constants(tree: ast.Module) -> dict[str, tuple[str, int]]:
    constants = {}
    for node in tree.body:
        target, value = _assignment(node)
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
        ):
            constants[target.id] = (value.value, value.lineno)
    return constants


def _module_dicts(tree: ast.Module) -> list[ast.Dict]:
    return [value for node in tree.body if isinstance(value := _assignment(node)[1], ast.Dict)]


def _assignment(node: ast.stmt) -> tuple[ast.expr | None, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return node.targets[0], node.value
    if isinstance(node, ast.AnnAssign):
        return node.target, node.value
    return None, None


def _looks_like_registry(node: ast.Dict) -> bool:
    return bool(node.keys) and all(
        isinstance(key, ast.Constant) and isinstance(key.value, int) for key in node.keys
    )


def _recipe(
    path: Path, key: ast.expr | None, value: ast.expr, strings: dict[str, tuple[str, int]]
) -> SglangRecipe:
    if not isinstance(key, ast.Constant) or not isinstance(key.value, int):
        raise SglangImportError(f"{path}: a registry key is not a PR number")
    pr = key.value
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return SglangRecipe(pr=pr, text=value.value, line=value.lineno, text_line=value.lineno)
    if isinstance(value, ast.Name) and value.id in strings:
        text, text_line = strings[value.id]
        return SglangRecipe(pr=pr, text=text, line=value.lineno, text_line=text_line)
    shown = value.id if isinstance(value, ast.Name) else ast.unparse(value)
    raise SglangImportError(
        f"{path}:{value.lineno}: the recipe of PR {pr} is {shown}, which is not a module-level "
        "string constant; expected the name of a YAML text defined in the same file"
    )

"""Tests for recipes.resolution's static checks: one tree per root, never a stale answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from revert_fixtures import write_fix

from prtoggle.patching import source_files
from prtoggle.recipes.resolution import checks_per_recipe
from prtoggle.recipes.schema import Recipe, load_recipe

RECIPE = """\
pr: {pr}
{applies_to}patches:
  - target: resengine.mod.{function}
    edits:
      - match: rows = bs * topk
        replacement: rows = bs
"""
FUNCTION = "def {name}(bs, topk):\n    rows = bs * topk\n    return rows\n"
MODULE = FUNCTION.format(name="width") + "\n\n" + FUNCTION.format(name="depth")


def engine(root: Path, *, version: str | None = None) -> Path:
    package = root / "resengine"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(MODULE)
    if version is not None:
        dist_info = root / f"resengine-{version}.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text(f"Name: resengine\nVersion: {version}\n")
    return root


def recipe(directory: Path, pr: int, *, function: str = "width", applies_to: str = "") -> Recipe:
    ranged = f"applies_to: {applies_to}\n" if applies_to else ""
    text = RECIPE.format(pr=pr, function=function, applies_to=ranged)
    return load_recipe(write_fix(directory, pr, text))


def test_the_recipes_of_one_root_share_one_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = engine(tmp_path / "site", version="1.2")
    fixes = [
        recipe(tmp_path / "pack", 1, applies_to="resengine>=1.0"),
        recipe(tmp_path / "pack", 2, function="depth", applies_to="resengine>=1.0"),
    ]
    opened: list[Path] = []
    real = source_files.open_source_tree
    monkeypatch.setattr(source_files, "open_source_tree", lambda p: opened.append(p) or real(p))
    checks = checks_per_recipe(fixes, search_path=[str(root)])
    assert [[check.status for check in checks[fix]] for fix in fixes] == [["ok"], ["ok"]]
    assert opened == [root]


def test_a_module_or_version_changed_between_two_checks_is_read_again(tmp_path: Path) -> None:
    root = engine(tmp_path / "site", version="1.2")
    fix = recipe(tmp_path / "pack", 1, applies_to="resengine<2")
    assert checks_per_recipe([fix], search_path=[str(root)])[fix][0].status == "ok"
    (root / "resengine" / "mod.py").write_text(MODULE.replace("rows = bs * topk", "rows = bs"))
    assert checks_per_recipe([fix], search_path=[str(root)])[fix][0].status == "stale"
    (root / "resengine" / "mod.py").write_text(MODULE)
    (root / "resengine-1.2.dist-info" / "METADATA").write_text("Name: resengine\nVersion: 2.0\n")
    assert checks_per_recipe([fix], search_path=[str(root)])[fix][0].status == "not-applicable"

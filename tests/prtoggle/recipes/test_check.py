"""Tests for recipes.check: recipe checks (imported and source-tree) and fixed->reverted diffs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from revert_fixtures import ModuleFactory, clean_toggle_state, modules_fixture, write_fix  # noqa: F401

from prtoggle.errors import PatchApplicationError, VersionRangeError
from prtoggle.recipes.check import TargetCheck, TargetDiff, check_registry, recipe_diffs
from prtoggle.recipes.registry import Registry, load_registry
from prtoggle.revert import toggle

APP_MODULE = '''\
"""An application module."""


class Backend:
    @property
    def width(self):
        return 8

    @width.setter
    def width(self, value):
        self._width = value

    def forward(self, x):
        y = x + 1
        z = y * 2
        w = z - 3
        v = w * w
        return v


def helper(a):
    return a
'''
FIX = """\
pr: 921
title: check me
patches:
  - target: app.core.Backend.forward
    edits:
      - match: z = y * 2
        replacement: |
          z = y * 3
          z = z + 0
  - target: app.core.Backend.width
    edits:
      - match: return 8
        replacement: return 4
"""
BROKEN_FIX = """\
pr: 922
title: stale recipe
patches:
  - target: app.core.helper
    edits:
      - match: return a + 1
        replacement: return a
  - target: app.core.Backend.forward
    edits:
      - match: return v
        replacement: return v +
"""


def registry_for(tmp_path: Path) -> Registry:
    write_fix(tmp_path / "reg", 921, FIX)
    write_fix(tmp_path / "reg", 922, BROKEN_FIX)
    return load_registry(dirs=[tmp_path / "reg"])


def test_check_reports_each_target_and_patches_nothing(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    path = modules.write("app.core", APP_MODULE)
    registry = registry_for(tmp_path)
    checks = check_registry(registry=registry)
    module = sys.modules["app.core"]
    assert module.Backend().forward(1) == 1 and module.Backend().width == 8
    yaml_path = tmp_path / "reg" / "922.yaml"
    assert checks == [
        TargetCheck(
            pr=921, target="app.core.Backend.forward", ok=True, message="", collection="reg"
        ),
        TargetCheck(pr=921, target="app.core.Backend.width", ok=True, message="", collection="reg"),
        TargetCheck(
            pr=922,
            target="app.core.helper",
            ok=False,
            collection="reg",
            status="stale",
            message=(
                f"app.core.helper: edit 1 of 1 ({yaml_path}:6) matched 0 times in "
                f"{path}:21-22; expected exactly 1.\n"
                "match (whitespace-stripped, blank lines ignored):\n"
                "    return a + 1\n"
                "nearest windows:\n"
                f"  {path}:22 (similarity 80%)\n"
                "      22 |     return a\n"
                f"  {path}:21 (similarity 23%)\n"
                "      21 | def helper(a):"
            ),
        ),
        TargetCheck(
            pr=922,
            target="app.core.Backend.forward",
            ok=False,
            collection="reg",
            status="error",
            message=(
                f"app.core.Backend.forward: the edited source does not compile: invalid "
                f"syntax at {path}:18 (edited line 6 of 6: 'return v +')"
            ),
        ),
    ]


def test_check_of_a_source_tree_never_imports_it(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "app" / "core").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    (root / "app" / "core" / "__init__.py").write_text(APP_MODULE)
    checks = check_registry(registry=registry_for(tmp_path), source_root=root, prs=[921])
    assert checks == [
        TargetCheck(pr=921, target=target, ok=True, message="", collection="reg", source=str(root))
        for target in ("app.core.Backend.forward", "app.core.Backend.width")
    ]
    assert "app" not in sys.modules


def test_check_of_a_source_tree_names_the_missing_file_or_definition(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "app").mkdir(parents=True)
    (root / "app" / "core.py").write_text("class Backend:\n    pass\n")
    checks = check_registry(registry=registry_for(tmp_path), source_root=root, prs=[921])
    assert [check.message for check in checks] == [
        f"app.core.Backend.forward: {root / 'app' / 'core.py'} has no definition of 'forward' "
        "in Backend",
        f"app.core.Backend.width: {root / 'app' / 'core.py'} has no definition of 'width' "
        "in Backend",
    ]
    empty = tmp_path / "empty"
    (empty / "app").mkdir(parents=True)
    missing = check_registry(registry=registry_for(tmp_path), source_root=empty, prs=[921])
    assert missing[0].status == "stale"
    assert missing[0].message == (
        f"app.core.Backend.forward: no module file for it under {empty}; looked for "
        f"{empty / 'app' / 'core' / 'Backend.py'}, "
        f"{empty / 'app' / 'core' / 'Backend' / '__init__.py'}, {empty / 'app' / 'core.py'}, "
        f"{empty / 'app' / 'core' / '__init__.py'}, {empty / 'app.py'}, "
        f"{empty / 'app' / '__init__.py'}"
    )


def test_a_target_whose_package_is_not_in_the_tree_is_absent_not_failed(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    checks = check_registry(registry=registry_for(tmp_path), source_root=empty, prs=[921])
    assert [(c.status, c.ok, c.failed, c.message) for c in checks] == [
        ("absent", False, False, f"package app is not in {empty}"),
        ("absent", False, False, f"package app is not in {empty}"),
    ]


def test_diff_hunks_carry_real_file_line_numbers(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "app").mkdir(parents=True)
    (root / "app" / "core.py").write_text(APP_MODULE)
    fix = registry_for(tmp_path).get(921)
    diffs = recipe_diffs(fix, source_root=root)
    path = root / "app" / "core.py"
    assert [(d.target, d.filename, d.first_line) for d in diffs] == [
        ("app.core.Backend.forward", str(path), 13),
        ("app.core.Backend.width", str(path), 5),
    ]
    assert diffs[0].unified_diff() == (
        f"--- {path} (fixed)\n"
        f"+++ {path} (PR 921 reverted)\n"
        "@@ -13,6 +13,7 @@\n"
        "     def forward(self, x):\n"
        "         y = x + 1\n"
        "-        z = y * 2\n"
        "+        z = y * 3\n"
        "+        z = z + 0\n"
        "         w = z - 3\n"
        "         v = w * w\n"
        "         return v\n"
    )


def test_diff_of_an_imported_module_matches_the_source_tree_diff(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    path = modules.write("app.core", APP_MODULE)
    imported = recipe_diffs(registry_for(tmp_path).get(921))
    from_tree = recipe_diffs(registry_for(tmp_path).get(921), source_root=modules.root)
    assert imported == from_tree
    assert imported[1] == TargetDiff(
        pr=921,
        target="app.core.Backend.width",
        filename=str(path),
        first_line=5,
        fixed_source="    @property\n    def width(self):\n        return 8\n",
        reverted_source="    @property\n    def width(self):\n        return 4\n",
    )


def test_every_shipped_fix_applies_to_the_fixes_tree_without_importing_it() -> None:
    from prtoggle.recipes.registry import shipped_yaml_dir

    registry = load_registry(dirs=[shipped_yaml_dir() / "fixes"])
    assert registry.prs(), f"no fix YAML in {shipped_yaml_dir()}"
    checks = check_registry(registry=registry, source_root=shipped_yaml_dir().parent)
    assert [check for check in checks if not check.ok] == []
    assert {check.pr for check in checks} == set(registry.prs())


def test_a_diff_of_a_tree_outside_the_recipes_applies_to_is_refused(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "app").mkdir(parents=True)
    (tree / "app" / "__init__.py").write_text("")
    (tree / "app" / "core.py").write_text(APP_MODULE)
    (tree / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "3.0"\n')
    write_fix(tmp_path / "reg", 923, "applies_to: app<3\n" + FIX.replace("pr: 921\n", ""))
    fix = load_registry(dirs=[tmp_path / "reg"]).get(923)
    with pytest.raises(VersionRangeError) as caught:
        recipe_diffs(fix, source_root=tree)
    assert str(caught.value) == (
        f"reg/923: no diff to show: app 3.0 (in {tree}) is outside the recipe's range app<3 "
        "(applies_to)"
    )
    assert [
        check.status
        for check in check_registry(
            registry=load_registry(dirs=[tmp_path / "reg"]), source_root=tree
        )
    ] == ["not-applicable"] * 2


REFUSED_MODULE = """\
import torch


class Base:
    def size(self):
        return 1


class Child(Base):
    def size(self):
        base = super().size()
        return base + 1


@torch.library.custom_op("prtoggle_check_test::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2
"""
REFUSED_FIXES = {
    923: ("app.refused.Child.size", "base = super().size()", "base = Base.size(self)"),
    924: ("app.refused.double", "return x * 2", "return x * 3"),
}


def test_check_refuses_what_the_runtime_refuses_statically_and_live_with_its_reason(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    """A super() method whose edit drops its __class__ cell, and a torch custom op."""
    for pr, (target, match, replacement) in REFUSED_FIXES.items():
        write_fix(
            tmp_path / "reg",
            pr,
            f"pr: {pr}\npatches:\n  - target: {target}\n    edits:\n"
            f"      - match: {match}\n        replacement: {replacement}\n",
        )
    registry = load_registry(dirs=[tmp_path / "reg"])
    modules.write("app.refused", REFUSED_MODULE)
    static = check_registry(registry=registry, source_root=modules.root)
    live = check_registry(registry=registry)
    runtime = []
    for pr in REFUSED_FIXES:
        with pytest.raises(PatchApplicationError) as refused:
            toggle.apply_revert(pr, registry=registry)
        runtime.append(str(refused.value))
    assert [(c.status, c.message) for c in static] == [("error", m) for m in runtime]
    assert [(c.status, c.message) for c in live] == [("error", m) for m in runtime]
    assert runtime == [
        "app.refused.Child.size: the edited code uses free variables () but the original "
        "uses ('__class__',); an edit may not add or drop uses of closure variables (or of "
        "super()/__class__)",
        "app.refused.double: is a torch custom op (a CustomOpDef, made by "
        "@torch.library.custom_op or @torch.library.triton_op), not a function; torch calls "
        "the implementation registered for the op, which a revert cannot swap; patch a plain "
        "function that the op calls instead",
    ]

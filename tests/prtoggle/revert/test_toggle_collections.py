"""Tests for reverts naming one collection's recipe (`C:N`), `0` as off, and one set per PR."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from revert_fixtures import ModuleFactory, clean_toggle_state, modules_fixture, write_fix  # noqa: F401

from prtoggle.errors import RevertSpecError
from prtoggle.protocol import REVERT_ENV
from prtoggle.recipes.registry import Registry, load_registry
from prtoggle.revert import toggle

FIX = """\
pr: 931
patches:
  - target: {module}.area
    edits:
      - match: return w * h
        replacement: return w + h
"""
SOURCE = "def area(w, h):\n    return w * h\n"


def two_collections(tmp_path: Path) -> Registry:
    """Collections `left` and `right`, each reverting PR 931 in its own module."""
    for name in ("left", "right"):
        write_fix(tmp_path / name, 931, FIX.format(module=f"{name}_mod"))
    return load_registry(dirs=[tmp_path / "left", tmp_path / "right"])


def test_a_qualified_revert_patches_only_that_collections_recipe(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    registry = two_collections(tmp_path)
    left, right = modules.load("left_mod", SOURCE), modules.load("right_mod", SOURCE)
    with toggle.reverted("right:931", registry=registry):
        assert (left.area(2, 3), right.area(2, 3)) == (6, 5)
        assert toggle.is_reverted(931) and toggle.is_reverted("right:931")
        assert not toggle.is_reverted("left:931")
    with toggle.reverted(931, registry=registry):
        assert (left.area(2, 3), right.area(2, 3)) == (5, 5)
    assert (left.area(2, 3), right.area(2, 3), toggle.is_reverted(931)) == (6, 6, False)


def test_a_pr_in_force_with_one_recipe_does_not_silently_take_another(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    registry = two_collections(tmp_path)
    modules.load("left_mod", SOURCE)
    modules.load("right_mod", SOURCE)
    with toggle.reverted("left:931", registry=registry):
        with pytest.raises(RevertSpecError) as caught:
            toggle.apply_revert("right:931", registry=registry)
        assert str(caught.value) == (
            "PR 931 is in force with left/931; right/931 cannot join it: restore PR 931 "
            "first, then revert the recipes wanted together"
        )
        with toggle.reverted("left:931", registry=registry):  # the same recipe: one more hold
            assert toggle.patched_targets(931) == ("left_mod.area",)


def test_the_variable_takes_qualified_entries_and_zero_means_off(
    modules: ModuleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_collections(tmp_path)
    yaml_path = os.pathsep.join(str(tmp_path / name) for name in ("left", "right"))
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", yaml_path)
    monkeypatch.setenv("PRTOGGLE_SGLANG_UPSTREAM", "0")
    left, right = modules.load("left_mod", SOURCE), modules.load("right_mod", SOURCE)
    monkeypatch.setenv(REVERT_ENV, "0")
    assert toggle.maybe_revert_pr_fix() == ()
    monkeypatch.setenv(REVERT_ENV, "left:931")
    assert toggle.maybe_revert_pr_fix() == (931,)
    assert (left.area(2, 3), right.area(2, 3)) == (5, 6)
    assert toggle.maybe_revert_pr_fix() == (931,)  # idempotent
    assert toggle.child_env(["left:931", 24856], base={})[REVERT_ENV] == "left:931,24856"


def test_a_malformed_qualified_spec_names_the_expected_forms(tmp_path: Path) -> None:
    registry = two_collections(tmp_path)
    with pytest.raises(RevertSpecError) as caught:
        toggle.reverted("left::931", registry=registry).__enter__()
    assert str(caught.value) == (
        "'left::931' is not a PR number or COLLECTION:PR (e.g. 27460, sglang:27460)"
    )

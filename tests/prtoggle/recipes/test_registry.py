"""Tests for prtoggle.recipes.registry: collections, lookup by PR and collection, directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from revert_fixtures import clean_toggle_state, write_fix  # noqa: F401

from prtoggle.errors import RegistryError, UnknownPRError
from prtoggle.recipes.registry import (
    default_registry,
    load_registry,
    shipped_collection_dirs,
    shipped_yaml_dir,
)

ONE_EDIT = "patches: [{target: a.f, edits: [{match: x, replacement: y}]}]\n"


def test_duplicate_pr_within_one_collection_names_both_files(tmp_path: Path) -> None:
    first = write_fix(tmp_path / "a", 904, "pr: 904\ntitle: t\n" + ONE_EDIT)
    second = tmp_path / "a" / "other.yaml"
    second.write_text("# copy\n" + first.read_text())
    with pytest.raises(RegistryError) as caught:
        load_registry(dirs=[tmp_path / "a"])
    assert str(caught.value) == (
        f"duplicate PR 904 in collection 'a': defined in {first}:1 and in {second}:2"
    )


def test_the_same_pr_in_two_collections_is_two_fixes(tmp_path: Path) -> None:
    first = write_fix(tmp_path / "engine", 904, "pr: 904\ntitle: engine's\n" + ONE_EDIT)
    second = write_fix(tmp_path / "sglang", 904, ONE_EDIT)
    write_fix(tmp_path / "sglang", 905, ONE_EDIT)
    registry = load_registry(dirs=[tmp_path / "engine", tmp_path / "sglang"])
    assert registry.collections() == ("engine", "sglang")
    assert registry.prs() == (904, 905)
    assert [(fix.label, fix.path) for fix in registry.find(904)] == [
        ("engine/904", first),
        ("sglang/904", second),
    ]
    assert registry.get(904, collection="sglang").path == second
    assert registry.get(905).collection == "sglang"
    assert [fix.label for fix in registry.in_collection("engine").recipes] == ["engine/904"]


def test_get_of_a_pr_in_several_collections_asks_for_one_and_lists_them(tmp_path: Path) -> None:
    first = write_fix(tmp_path / "engine", 904, ONE_EDIT)
    second = write_fix(tmp_path / "sglang", 904, ONE_EDIT)
    registry = load_registry(dirs=[tmp_path / "engine", tmp_path / "sglang"])
    with pytest.raises(UnknownPRError) as caught:
        registry.get(904)
    assert str(caught.value) == (
        f"PR 904 is in 2 collections: engine ({first}), sglang ({second}); choose one with "
        "--collection engine or --collection sglang"
    )


def test_lookup_in_a_collection_names_where_the_pr_is_instead(tmp_path: Path) -> None:
    write_fix(tmp_path / "engine", 904, ONE_EDIT)
    write_fix(tmp_path / "sglang", 905, ONE_EDIT)
    registry = load_registry(dirs=[tmp_path / "engine", tmp_path / "sglang"])
    with pytest.raises(UnknownPRError) as caught:
        registry.find(904, collection="sglang")
    assert str(caught.value) == (
        "PR 904 is not in collection 'sglang'; its PRs: 905; PR 904 is in: engine"
    )
    with pytest.raises(UnknownPRError) as caught:
        registry.in_collection("vllm")
    assert str(caught.value) == (
        f"no recipe collection named 'vllm'; collections: engine ({tmp_path / 'engine'}), "
        f"sglang ({tmp_path / 'sglang'})"
    )


def test_two_collections_with_one_name_is_an_error_naming_both_dirs(tmp_path: Path) -> None:
    (tmp_path / "one" / "recipes").mkdir(parents=True)
    (tmp_path / "two" / "recipes").mkdir(parents=True)
    with pytest.raises(RegistryError) as caught:
        load_registry(dirs=[tmp_path / "one" / "recipes", tmp_path / "two" / "recipes"])
    assert str(caught.value) == (
        f"two recipe collections are named 'recipes': {tmp_path / 'one' / 'recipes'} and "
        f"{tmp_path / 'two' / 'recipes'}; a collection is named after its directory, rename one"
    )


def test_an_empty_collection_is_valid(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.md").write_text("nothing yet\n")
    registry = load_registry(dirs=[tmp_path / "empty"])
    assert (registry.collections(), registry.recipes, registry.prs()) == (("empty",), (), ())


def test_shipped_collections_are_the_subdirectories_of_yaml() -> None:
    assert [d.name for d in shipped_collection_dirs()] == ["fixes", "sglang"]
    registry = load_registry(dirs=shipped_collection_dirs())
    demo = registry.in_collection("fixes")
    assert demo.prs() == (21649, 22832, 24856, 26521, 27460)
    assert all(fix.path.parent == shipped_yaml_dir() / "fixes" for fix in demo.recipes)


def test_registry_lookup_of_an_unknown_pr_lists_registered_ones(tmp_path: Path) -> None:
    for pr in (906, 905):
        write_fix(
            tmp_path,
            pr,
            f"pr: {pr}\ntitle: t\npatches: [{{target: a.f, "
            "edits: [{match: x, replacement: y}]}]\n",
        )
    registry = load_registry(dirs=[tmp_path])
    assert registry.prs() == (905, 906)
    with pytest.raises(UnknownPRError) as caught:
        registry.get(7)
    assert str(caught.value) == (
        f"PR 7 is not registered; registered PRs: 905, 906 (registry directories: {tmp_path})"
    )


def test_fixes_sort_by_merge_date_with_undated_last(tmp_path: Path) -> None:
    for pr, merged in ((907, "2026-03-01"), (908, None), (909, "2025-12-31")):
        date = f"merged: {merged}\n" if merged else ""
        write_fix(
            tmp_path,
            pr,
            f"pr: {pr}\ntitle: t\n{date}patches: [{{target: a.f, "
            "edits: [{match: x, replacement: y}]}]\n",
        )
    assert [fix.pr for fix in load_registry(dirs=[tmp_path]).by_merge_date()] == [909, 907, 908]


def test_yaml_path_env_adds_directories_after_the_shipped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_fix(
        tmp_path / "extra",
        910,
        "pr: 910\ntitle: t\npatches: [{target: a.f, edits: [{match: x, replacement: y}]}]\n",
    )
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", f"{tmp_path / 'extra'}{os.pathsep}")
    registry = default_registry()
    assert registry.dirs == (*shipped_collection_dirs(), tmp_path / "extra")
    assert registry.get(910).path == tmp_path / "extra" / "910.yaml"
    assert registry.get(910).collection == "extra"


def test_missing_yaml_path_directory_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(tmp_path / "absent"))
    with pytest.raises(RegistryError) as caught:
        default_registry()
    assert str(caught.value) == (
        f"registry directory {tmp_path / 'absent'} does not exist or is not a directory "
        f"(registry directories: {shipped_yaml_dir() / 'fixes'}, {shipped_yaml_dir() / 'sglang'}, "
        f"{tmp_path / 'absent'}; extra ones "
        "come from PRTOGGLE_YAML_PATH)"
    )


def test_shipped_yaml_dir_is_the_repository_yaml_directory_in_a_checkout() -> None:
    assert shipped_yaml_dir() == Path(__file__).resolve().parents[3] / "yaml"


def test_a_directory_named_like_a_fix_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "905.yaml").mkdir()
    with pytest.raises(RegistryError) as caught:
        load_registry(dirs=[tmp_path])
    assert str(caught.value) == (
        f"{tmp_path / '905.yaml'}: not a regular file (a directory); a recipe is a regular "
        ".yaml file"
    )


def test_shipped_collections_skip_files_hidden_and_private_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import prtoggle.recipes.registry

    root = tmp_path / "_shipped_yaml"  # the wheel's copy of yaml/ (force-include)
    for name in ("sglang", "fixes", ".git", "__pycache__"):
        (root / name).mkdir(parents=True)
    (root / "README.md").write_text("collections\n")
    monkeypatch.setattr(prtoggle.recipes.registry, "shipped_yaml_dir", lambda: root)
    assert shipped_collection_dirs() == (root / "fixes", root / "sglang")

"""Tests for `prtoggle check`: statuses, --strict, JSON rows, the recipe x tree matrix."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
from cli_fakes import (
    ANSWER_FIX,
    BROKEN_FIX,
    FIRST_HALF_FIX,
    REGISTERED,
    TARGET_MODULE,
    TARGET_SOURCE,
    FakeProject,
    absent_engine_collection,
    fake_project,
    invoke,
)

__all__ = ["fake_project"]  # the fixture, imported for pytest

ABSENT_FIX = 90010
DECORATOR_FIX = 90011
DECORATED_SOURCE = """\
def keep(function):
    return function


@keep
def decorated(x):
    return x
"""


def add_fix(project: FakeProject, pr: int, target: str, match: str, replacement: str) -> None:
    (project.registry_dir / f"{pr}.yaml").write_text(
        f"pr: {pr}\ntitle: fix {pr}\npatches:\n  - target: {target}\n    edits:\n"
        f'      - match: "{match}"\n        replacement: "{replacement}"\n'
    )


def test_json_rows_carry_pr_collection_target_ok_status_and_message(
    fake_project: FakeProject,
) -> None:
    result = invoke("check", "--json", str(ANSWER_FIX), str(BROKEN_FIX))
    assert result.exit_code == 1
    rows = json.loads(result.output)
    assert [list(row) for row in rows] == [
        ["pr", "collection", "target", "ok", "status", "message"]
    ] * 2
    assert [(row["pr"], row["ok"], row["status"]) for row in rows] == [
        (ANSWER_FIX, True, "ok"),
        (BROKEN_FIX, False, "stale"),
    ]
    assert rows[1]["message"].startswith(
        f"{TARGET_MODULE}.answer: edit 1 of 1 ({fake_project.registry_dir / '90002.yaml'}:10) "
        "matched 0 times in "
    )


def test_a_named_pr_whose_package_is_found_nowhere_is_absent_and_fails(
    fake_project: FakeProject,
) -> None:
    add_fix(fake_project, ABSENT_FIX, "prtoggle_no_such_package.mod.f", "x = 1", "x = 2")
    result = invoke("check", str(ANSWER_FIX), str(ABSENT_FIX))
    assert result.exit_code == 1, result.output
    assert result.output.splitlines() == [
        f"{ANSWER_FIX}  {TARGET_MODULE}.answer: ok",
        f"{ABSENT_FIX}  prtoggle_no_such_package.mod.f: absent: package "
        f"prtoggle_no_such_package is not installed here, nor in {os.getcwd()}",
        "1 of 2 targets of 2 fixes revert cleanly; 1 absent (package not installed)",
    ]


def test_over_a_whole_collection_absent_fails_only_when_strict_or_when_all_are_absent(
    fake_project: FakeProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mixed, missing = tmp_path / "mixed", tmp_path / "missing"
    paths = [fake_project.registry_dir, mixed, missing]
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", os.pathsep.join(str(path) for path in paths))
    for collection in (mixed, missing):
        collection.mkdir()
        add_fix(
            FakeProject(registry_dir=collection, source_dir=fake_project.source_dir),
            ABSENT_FIX,
            "prtoggle_no_such_package.mod.f",
            "x = 1",
            "x = 2",
        )
    ok = fake_project.registry_dir / f"{ANSWER_FIX}.yaml"
    (mixed / f"{ANSWER_FIX}.yaml").write_text(ok.read_text())
    assert invoke("check", "--collection", "mixed").exit_code == 0
    assert invoke("check", "--collection", "mixed", "--strict").exit_code == 1
    nothing = invoke("check", "--collection", "missing")
    assert (nothing.exit_code, nothing.output.splitlines()[-1]) == (
        1,
        "0 of 1 target of 1 fix revert cleanly; 1 absent (package not installed)",
    )


def test_a_source_root_holding_none_of_the_packages_fails_naming_the_folder_that_does(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    checkout, empty = tmp_path / "checkout", tmp_path / "empty"
    package = checkout / "python" / "prtoggle_shop"
    package.mkdir(parents=True)
    empty.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text("def f():\n    x = 1\n    return x\n")
    add_fix(fake_project, ABSENT_FIX, "prtoggle_shop.mod.f", "x = 1", "x = 2")
    right = invoke("check", str(ABSENT_FIX), "--source-root", str(checkout / "python"))
    assert right.exit_code == 0, right.output
    hint = f"did you mean {checkout / 'python'}?"
    for wrong in (checkout, package):
        result = invoke("check", str(ABSENT_FIX), "--source-root", str(wrong))
        assert (result.exit_code, result.stdout, result.stderr) == (
            2,
            "",
            f"error: --source-root {wrong} holds no prtoggle_shop/; {hint}\n",
        )
    nowhere = invoke("check", "--source-root", str(empty), str(ABSENT_FIX))
    assert (nowhere.exit_code, nowhere.stderr) == (
        2,
        f"error: --source-root {empty} holds no prtoggle_shop/; expected the folder that "
        "holds the package (a checkout's python/ or src/), a wheel or an sdist\n",
    )


def test_several_source_roots_give_a_recipe_by_tree_matrix(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    wheel = tmp_path / "fake-2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{TARGET_MODULE}.py", TARGET_SOURCE.replace("value = 42", "value = 43"))
    tree = fake_project.source_dir
    args = ["check", "--source-root", str(tree), "--source-root", str(wheel)]
    result = invoke(*args, str(ANSWER_FIX), str(FIRST_HALF_FIX))
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert [line.split() for line in lines[:3]] == [
        ["PR", "COLLECTION", "TARGET", "src", wheel.name],
        [str(ANSWER_FIX), "registry", f"{TARGET_MODULE}.answer", "ok", "stale"],
        [str(FIRST_HALF_FIX), "registry", f"{TARGET_MODULE}.first_half", "ok", "ok"],
    ]
    assert lines[3].startswith(
        f"{wheel.name}: {ANSWER_FIX}  {TARGET_MODULE}.answer: stale: edit 1 of 1 "
    )
    rows = json.loads(invoke(*args, "--json", str(ANSWER_FIX)).output)
    assert [(row["source"], row["status"]) for row in rows] == [
        (str(tree), "ok"),
        (str(wheel), "stale"),
    ]


def test_a_decorator_edit_is_refused_by_check_and_show_in_one_line(
    fake_project: FakeProject,
) -> None:
    (fake_project.source_dir / "prtoggle_fake_decorated.py").write_text(DECORATED_SOURCE)
    add_fix(fake_project, DECORATOR_FIX, "prtoggle_fake_decorated.decorated", "@keep", "")
    path = fake_project.source_dir / "prtoggle_fake_decorated.py"
    why = (
        f"{fake_project.registry_dir / f'{DECORATOR_FIX}.yaml'}:4: PR {DECORATOR_FIX}: "
        f"prtoggle_fake_decorated.decorated ({path}:5): the edit changes the decorator lines "
        "of decorated(); decorators and anything outside the def's signature and body cannot "
        "take effect through a code swap"
    )
    checked = invoke("check", str(DECORATOR_FIX))
    assert checked.exit_code == 1
    assert checked.output.splitlines()[0] == (
        f"{DECORATOR_FIX}  prtoggle_fake_decorated.decorated: FAILED: {why}"
    )
    shown = invoke("show", str(DECORATOR_FIX))
    assert shown.exit_code == 2
    assert shown.stderr == f"error: {why}\n"


def test_a_pr_in_two_collections_is_checked_in_each_and_collection_narrows_it(
    fake_project: FakeProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / f"{ANSWER_FIX}.yaml").write_text(
        f"patches:\n  - target: {TARGET_MODULE}.answer\n    edits:\n"
        "      - match: return value\n        replacement: return 0\n"
    )
    monkeypatch.setenv(
        "PRTOGGLE_YAML_PATH", os.pathsep.join([str(fake_project.registry_dir), str(other)])
    )
    result = invoke("check", str(ANSWER_FIX))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{ANSWER_FIX}  registry  {TARGET_MODULE}.answer: ok",
        f"{ANSWER_FIX}  other  {TARGET_MODULE}.answer: ok",
        "2 of 2 targets of 2 fixes revert cleanly",
    ]
    narrowed = json.loads(invoke("check", "--collection", "other", "--json").output)
    assert [(row["pr"], row["collection"], row["status"]) for row in narrowed] == [
        (ANSWER_FIX, "other", "ok")
    ]


RANGED_FIX = 90012


def add_ranged_fix(project: FakeProject, applies_to: str) -> Path:
    path = project.registry_dir / f"{RANGED_FIX}.yaml"
    path.write_text(
        f"applies_to: {applies_to}\npatches:\n  - target: {TARGET_MODULE}.answer\n"
        "    edits:\n      - match: value = 42\n        replacement: value = 41\n"
    )
    return path


def fake_wheel(path: Path, version: str) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{TARGET_MODULE}.py", TARGET_SOURCE)
        archive.writestr(
            f"prtoggle_fake-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: prtoggle-fake\nVersion: {version}\n",
        )
    return path


def test_a_tree_outside_a_recipes_applies_to_is_not_applicable_and_never_a_failure(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    add_ranged_fix(fake_project, "prtoggle-fake>=1.0,<2.0")
    old = fake_wheel(tmp_path / "prtoggle_fake-1.5-py3-none-any.whl", "1.5")
    new = fake_wheel(tmp_path / "prtoggle_fake-2.0-py3-none-any.whl", "2.0")
    args = ["check", "--strict", "--source-root", str(old), "--source-root", str(new)]
    result = invoke(*args, str(RANGED_FIX))
    assert result.exit_code == 0, result.output
    assert [line.split() for line in result.output.splitlines()[:2]] == [
        ["PR", "COLLECTION", "TARGET", "1.5", "2.0"],
        [str(RANGED_FIX), "registry", f"{TARGET_MODULE}.answer", "ok", "not-applicable"],
    ]
    assert result.output.splitlines()[2:] == [
        f"2.0: {RANGED_FIX}  {TARGET_MODULE}.answer: not-applicable: prtoggle-fake 2.0 "
        f"(in {new}) is outside the recipe's range prtoggle-fake>=1.0,<2.0 (applies_to)"
    ]
    rows = json.loads(invoke(*args, "--json", str(RANGED_FIX)).output)
    assert [(row["source"], row["ok"], row["status"]) for row in rows] == [
        (str(old), True, "ok"),
        (str(new), False, "not-applicable"),
    ]


def test_an_installed_version_outside_applies_to_is_not_applicable(
    fake_project: FakeProject,
) -> None:
    add_ranged_fix(fake_project, "prtoggle-fake>=1.0,<2.0")
    dist_info = fake_project.source_dir / "prtoggle_fake-2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Name: prtoggle-fake\nVersion: 2.3\n")
    result = invoke("check", str(ANSWER_FIX), str(RANGED_FIX))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{ANSWER_FIX}  {TARGET_MODULE}.answer: ok",
        f"{RANGED_FIX}  {TARGET_MODULE}.answer: not applicable: prtoggle-fake 2.3 (installed) "
        "is outside the recipe's range prtoggle-fake>=1.0,<2.0 (applies_to)",
        "1 of 2 targets of 2 fixes revert cleanly; 1 not applicable (version outside applies_to)",
    ]


def test_a_stale_recipe_is_followed_by_the_rebase_command_that_proposes_an_update(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    wheel = tmp_path / "fake-2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{TARGET_MODULE}.py", TARGET_SOURCE.replace("value = 42", "value = 43"))
    result = invoke("check", "--source-root", str(wheel), str(ANSWER_FIX), str(FIRST_HALF_FIX))
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        f"hint: `prtoggle rebase {ANSWER_FIX} --collection registry --source-root {wheel}` "
        "proposes an updated recipe for the stale one"
    )


def test_check_reports_each_target_and_fails_on_a_broken_revert(
    fake_project: FakeProject,
) -> None:
    result = invoke("check")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert f"{ANSWER_FIX}  {TARGET_MODULE}.answer: ok" in lines
    [broken] = [line for line in lines if line.startswith(str(BROKEN_FIX))]
    assert broken.startswith(f"{BROKEN_FIX}  {TARGET_MODULE}.answer: STALE: ")
    assert lines[-2:] == [
        "4 of 5 targets of 5 fixes revert cleanly",
        f"hint: `prtoggle rebase {BROKEN_FIX} --collection registry` proposes an updated "
        "recipe for the stale one",
    ]


def test_check_of_good_fixes_exits_zero(fake_project: FakeProject) -> None:
    result = invoke("check", str(ANSWER_FIX), str(FIRST_HALF_FIX))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "2 of 2 targets of 2 fixes revert cleanly"


def test_check_source_root_json(fake_project: FakeProject) -> None:
    source_root = str(fake_project.source_dir)
    result = invoke("check", "--source-root", source_root, "--json", str(BROKEN_FIX))
    assert result.exit_code == 1
    [record] = json.loads(result.output)
    assert (record["pr"], record["target"], record["ok"]) == (
        BROKEN_FIX,
        f"{TARGET_MODULE}.answer",
        False,
    )
    assert record["message"] != ""


def test_check_missing_source_root_is_a_usage_error(fake_project: FakeProject) -> None:
    result = invoke("check", "--source-root", "/no/such/dir")
    assert (result.exit_code, result.stderr) == (
        2,
        "error: Invalid value for '--source-root': Path '/no/such/dir' does not exist "
        "(see `prtoggle check --help`)\n",
    )


def test_check_of_an_unknown_pr_is_a_one_line_error(fake_project: FakeProject) -> None:
    result = invoke("check", str(ANSWER_FIX), "4711")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: PR 4711 is not registered; registered PRs: {REGISTERED} "
    )


def test_a_bare_check_folds_a_collection_whose_package_is_not_installed_into_one_line(
    fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = absent_engine_collection(fake_project)
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", f"{fake_project.registry_dir}{os.pathsep}{demo}")
    result = invoke("check")
    lines = result.output.splitlines()
    assert not [line for line in lines if "prtoggle_no_such_engine.answer" in line]
    folded = "not checked, package not installed here: demo (package prtoggle_no_such_engine)"
    assert folded in lines
    named = invoke("check", "--collection", "demo")
    assert "prtoggle_no_such_engine.answer: absent: " in named.output


def test_a_bare_check_where_no_recipes_package_is_installed_says_so_in_one_line_and_exits_1(
    fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(absent_engine_collection(fake_project)))
    result = invoke("check")
    assert (result.exit_code, result.output) == (
        1,
        "nothing checked, no package installed here: demo (package prtoggle_no_such_engine)\n",
    )

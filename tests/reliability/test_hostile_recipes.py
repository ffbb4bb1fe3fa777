"""Hostile recipe files, in real processes: bounded reading, no recipe code run by check/show."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PATCHES = (
    "patches: [{target: hostile_target.f, edits: [{match: 'return a', "
    "replacement: 'return -a'}]}]\n"
)
BOMB = (
    "title: ["
    + ", ".join(
        [
            "&a [x, x, x, x, x, x, x, x, x]",
            *(
                f"&{name} [{', '.join([f'*{previous}'] * 9)}]"
                for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
            ),
        ]
    )
    + "]\n"
)
LOADER_ERRORS = {
    "date": (
        "merged: 2026-13-45\n",
        ":3: YAML value error: cannot read '2026-13-45' as timestamp: month must be in 1..12",
    ),
    "tag": (
        "title: !!int abc\n",
        ":3: YAML value error: cannot read 'abc' as int: invalid literal "
        "for int() with base 10: 'abc'",
    ),
    "complex key": (
        "? [a, b]\n: 1\n",
        ":3: a mapping key must be a string or a number, got a list ['a', 'b']",
    ),
    "digits": (
        "",
        ":1: YAML value error: cannot read '" + "1" * 76 + "... as int: Exceeds the limit "
        "(4300 digits) for integer string conversion: value has 5000 digits; use "
        "sys.set_int_max_str_digits() to increase the limit",
    ),
    "base 60": ("", ":1: 'pr' must be a positive integer, got '1:30'"),
}
TARGET = """\
def f(a=1):
    return a
"""


def prtoggle(
    args: list[str],
    tmp_path: Path,
    *,
    collection: Path,
    timeout: float = 60,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "src"), str(REPO_ROOT)]),
        "PRTOGGLE_YAML_PATH": str(collection),
    }
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=cwd or tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def listed_as_error(result: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    """`list`'s status and stderr, once its last row is the bad recipe, listed as ERROR
    (the table's rows start with a PR number or `?`; the footnotes follow them)."""
    rows = [
        line for line in result.stdout.splitlines() if line.split()[0].isdigit() or line[0] == "?"
    ]
    assert rows[-1].split()[4] == "ERROR", result.stdout
    return result.returncode, result.stderr


def project(tmp_path: Path, recipe: str = "", *, name: str = "905.yaml") -> Path:
    """A target module under src/ and a collection `hostile` holding one recipe."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "hostile_target.py").write_text(TARGET)
    collection = tmp_path / "hostile"
    collection.mkdir()
    if recipe:
        (collection / name).write_text(recipe)
    return collection


def test_a_yaml_alias_bomb_is_refused_at_once_by_list(tmp_path: Path) -> None:
    collection = project(tmp_path, "pr: 905\n" + BOMB + PATCHES)
    result = prtoggle(["-m", "prtoggle", "list"], tmp_path, collection=collection, timeout=20)
    assert listed_as_error(result) == (
        2,
        f"error: {collection / '905.yaml'}:2: the YAML document expands to more than 50000 "
        "nodes (aliases counted at every use); a recipe is a few hundred\n",
    )


def test_a_yaml_alias_bomb_is_refused_at_once_by_apply_patches_from_config(
    tmp_path: Path,
) -> None:
    collection = project(tmp_path)
    code = textwrap.dedent(f"""\
        from prtoggle.revert.source_patcher import apply_patches_from_config
        try:
            apply_patches_from_config({(BOMB + PATCHES)!r})
        except Exception as exc:
            print(type(exc).__name__, exc)
        """)
    result = prtoggle(["-c", code], tmp_path, collection=collection, timeout=20)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "RegistryError patch config:1: the YAML document expands to more than 50000 nodes "
        "(aliases counted at every use); a recipe is a few hundred\n",
        "",
    )


def test_an_error_shows_at_most_a_few_hundred_characters_of_a_huge_value(
    tmp_path: Path,
) -> None:
    huge = "[" + ", ".join(["word"] * 40_000) + "]"
    collection = project(tmp_path, f"pr: 905\ntitle: {huge}\n" + PATCHES)
    result = prtoggle(["-m", "prtoggle", "list"], tmp_path, collection=collection)
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"error: {collection / '905.yaml'}:2: 'title' must be a non-empty string, got list "
        "['word', 'word', 'word', 'word', 'word', 'word', ...]"
    )
    assert len(result.stderr) < 400


def test_a_fifo_in_a_collection_is_refused_without_hanging(tmp_path: Path) -> None:
    collection = project(tmp_path)
    os.mkfifo(collection / "905.yaml")
    result = prtoggle(["-m", "prtoggle", "list"], tmp_path, collection=collection, timeout=20)
    assert listed_as_error(result) == (
        2,
        f"error: {collection / '905.yaml'}: not a regular file (a FIFO); a recipe is a "
        "regular .yaml file\n",
    )


@pytest.mark.parametrize("outside", ["/dev/zero", "secret.txt"])
def test_a_recipe_symlinked_out_of_its_collection_is_refused_unread(
    tmp_path: Path, outside: str
) -> None:
    collection = project(tmp_path)
    target = Path(outside) if outside.startswith("/") else tmp_path / outside
    if not outside.startswith("/"):
        target.write_text("password: hunter2\n")
    (collection / "905.yaml").symlink_to(target)
    result = prtoggle(["-m", "prtoggle", "list"], tmp_path, collection=collection, timeout=20)
    assert listed_as_error(result) == (
        2,
        f"error: {collection / '905.yaml'}: is a symlink to {target}, outside its collection "
        f"{collection}; refused without reading it (recipes are code prtoggle compiles: keep "
        "each one inside its collection directory)\n",
    )


@pytest.mark.parametrize("kind", sorted(LOADER_ERRORS))
def test_every_loader_error_is_one_error_line_naming_the_file(tmp_path: Path, kind: str) -> None:
    extra, message = LOADER_ERRORS[kind]
    pr = {"base 60": "1:30", "digits": "1" * 5000}.get(kind, "905")
    collection = project(tmp_path, f"pr: {pr}\n{PATCHES}{extra}", name="hostile.yaml")
    result = prtoggle(["-m", "prtoggle", "list"], tmp_path, collection=collection)
    expected = f"error: {collection / 'hostile.yaml'}{message}\n"
    assert listed_as_error(result) == (2, expected)


@pytest.mark.parametrize("number", ["²", "١٢"])
def test_a_pr_number_in_other_digits_is_one_error_line(tmp_path: Path, number: str) -> None:
    collection = project(tmp_path, "pr: 12\n" + PATCHES, name="12.yaml")
    args = ["-m", "prtoggle", "run", "-r", number, "--", sys.executable, "-c", "pass"]
    result = prtoggle(args, tmp_path, collection=collection)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: -r={number!r}: {number!r} is not a PR number;")
    assert result.stderr.count("\n") == 1


def test_a_recipe_file_named_in_other_digits_is_not_a_pr_number(tmp_path: Path) -> None:
    collection = project(tmp_path, PATCHES, name="١٢.yaml")
    result = prtoggle(["-m", "prtoggle", "list"], tmp_path, collection=collection)
    assert listed_as_error(result) == (
        2,
        f"error: {collection / '١٢.yaml'}:1: fix file has no 'pr' key and its name is not "
        "<PR>.yaml; add `pr: <number>` or name the file after the PR number\n",
    )


@pytest.mark.parametrize("command", [["check", "905"], ["show", "905"]])
def test_check_and_show_never_run_code_from_a_recipe(tmp_path: Path, command: list[str]) -> None:
    marker = tmp_path / "ran"
    edit = (
        f"[{{match: 'def f(a=1):', replacement: \"def f(a=__import__('pathlib').Path("
        f'{str(marker)!r}).touch()):"}}]'
    )
    recipe = f"pr: 905\npatches: [{{target: hostile_target.f, edits: {edit}}}]\n"
    collection = project(tmp_path, recipe)
    result = prtoggle(["-m", "prtoggle", *command], tmp_path, collection=collection)
    assert result.returncode == 0, result.stderr
    assert not marker.exists()


def test_the_current_directory_on_the_path_is_a_collection_named_after_it(
    tmp_path: Path,
) -> None:
    collection = project(tmp_path, "pr: 905\n" + PATCHES)
    args = ["-m", "prtoggle", "list", "--collection", "hostile", "--json"]
    result = prtoggle(args, tmp_path, collection=Path("."), cwd=collection)
    assert result.returncode == 0, result.stderr
    assert '"collection": "hostile"' in result.stdout


def test_a_shipped_collection_on_the_path_again_is_one_collection(tmp_path: Path) -> None:
    result = prtoggle(
        ["-m", "prtoggle", "list", "--collection", "fixes"],
        tmp_path,
        collection=REPO_ROOT / "yaml" / "fixes",
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert "26521" in result.stdout


def test_static_check_does_not_count_type_checking_imports_as_module_globals(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree" / "typed"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from decimal import "
        "Decimal\n\n\ndef f(a=1):\n    return a\n"
    )
    recipe = (
        "pr: 905\npatches:\n  - target: typed.f\n    edits:\n"
        "      - match: 'def f(a=1):'\n        replacement: 'def f(a=Decimal):'\n"
    )
    collection = project(tmp_path, recipe)
    args = ["-m", "prtoggle", "check", "--source-root", str(tmp_path / "tree"), "905"]
    result = prtoggle(args, tmp_path, collection=collection)
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout == (
        f"905  typed.f: FAILED: {collection / '905.yaml'}:3: PR 905: typed.f "
        f"({tree / '__init__.py'}:7): the edited default of a `Decimal` reads Decimal, which "
        "the module does not bind at its top level; a code swap evaluates new defaults and "
        "annotations in the module's globals\n0 of 1 target of 1 fix revert cleanly\n"
    )

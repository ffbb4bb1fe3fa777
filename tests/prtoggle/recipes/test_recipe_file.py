"""Tests of recipes.authoring.recipe_file: drafted `names` checked before the recipe is written."""

from __future__ import annotations

from pathlib import Path

import yaml

from prtoggle.patching.source_files import open_source_tree
from prtoggle.patching.types import Edit
from prtoggle.recipes.authoring.from_diff import (
    Draft,
    DraftNames,
    DraftTarget,
    NotRevertedChange,
)
from prtoggle.recipes.authoring.recipe_file import RecipeHeader, checked_recipe


def tree_with_module(tmp_path: Path, text: str) -> Path:
    package = tmp_path / "python" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(text)
    return tmp_path / "python"


def test_a_names_entry_that_checks_is_kept_and_one_that_does_not_is_listed_as_not_reverted(
    tmp_path: Path,
) -> None:
    root = tree_with_module(tmp_path, "LIMIT = 2\n\ndef total(x):\n    return x\n")
    good = DraftNames("pkg.mod", "LIMIT = 1\n", (), "pkg/mod.py", 1)
    reads_nothing_defined = DraftNames(
        "pkg.mod", "def helper(x):\n    return missing_name(x)\n", (), "pkg/mod.py", 3
    )
    draft = Draft(files=["pkg/mod.py"], names=[good, reads_nothing_defined])
    checked = checked_recipe(
        RecipeHeader(7, "t"),
        draft,
        path=tmp_path / "out" / "7.yaml",
        roots=[open_source_tree(root)],
    )
    assert checked.names == (good,)
    assert [(c.file, c.line) for c in checked.not_reverted] == [("pkg/mod.py", 3)]
    (reason,) = [c.reason for c in checked.not_reverted]
    assert reason == (
        "`pkg.mod.helper` not defined back: its pre-fix code reads `missing_name`, which the "
        "revert does not define"
    )
    document = yaml.safe_load(checked.text)
    assert document["names"] == [{"scope": "pkg.mod", "define": "LIMIT = 1\n"}]
    assert document["not_reverted"] == [
        {"file": "pkg/mod.py", "line": 3, "reason": reason},
    ]


def test_a_names_entry_whose_scope_no_tree_holds_is_listed_as_not_reverted(
    tmp_path: Path,
) -> None:
    root = tree_with_module(tmp_path, "LIMIT = 2\n")
    elsewhere = DraftNames("other.mod", "LIMIT = 1\n", (), "other/mod.py", 1)
    checked = checked_recipe(
        RecipeHeader(8, "t"),
        Draft(files=["other/mod.py"], names=[elsewhere]),
        path=tmp_path / "out" / "8.yaml",
        roots=[open_source_tree(root)],
    )
    assert checked.names == ()
    assert checked.not_reverted == (
        NotRevertedChange(
            "other/mod.py", 1, "the revert does not check (absent: no tree holds other.mod)"
        ),
    )


def test_a_target_reading_a_name_only_a_listed_names_entry_defines_is_listed_too(
    tmp_path: Path,
) -> None:
    # The run-time global check would refuse the revert: the target reads `_old`, which
    # neither the module nor a kept names entry binds.
    root = tree_with_module(tmp_path, "def total(x):\n    return x\n")
    tree = open_source_tree(root)
    failing = DraftNames("pkg.mod", "_old = missing_name(1)\n", (), "pkg/mod.py", 1)
    target = DraftTarget(
        "pkg.mod.total",
        (Edit(match="return x\n", kind="replacement", text="return x + _old\n", line=0),),
        tree,
        "pkg/mod.py",
        2,
        scope="pkg.mod",
    )
    draft = Draft(files=["pkg/mod.py"], targets=[target], names=[failing])
    checked = checked_recipe(
        RecipeHeader(9, "t"), draft, path=tmp_path / "out" / "9.yaml", roots=[tree]
    )
    assert (checked.targets, checked.names) == ((), ())
    assert [(c.line, c.reason) for c in checked.not_reverted][1] == (
        2,
        "the revert does not check (error: reads `_old`, not defined in module pkg.mod after "
        "the revert)",
    )


def test_a_names_entry_keeps_the_statements_that_do_not_read_the_undefined_global(
    tmp_path: Path,
) -> None:
    root = tree_with_module(tmp_path, "from os import sep\n\ndef total(x):\n    return x\n")
    define = (
        "from os import path\n"
        "\n"
        "@staticmethod\n"
        "def helper(x):\n"
        "    return gone(x)\n"
        "\n"
        "LIMIT = 1\n"
        "TABLE = {'a': gone}\n"
    )
    entry = DraftNames("pkg.mod", define, ("sep",), "pkg/mod.py", 2)
    checked = checked_recipe(
        RecipeHeader(10, "t"),
        Draft(files=["pkg/mod.py"], names=[entry]),
        path=tmp_path / "out" / "10.yaml",
        roots=[open_source_tree(root)],
    )
    assert [(n.define, n.remove) for n in checked.names] == [
        ("from os import path\n\n\nLIMIT = 1\n", ("sep",))
    ]
    assert checked.not_reverted == (
        NotRevertedChange(
            "pkg/mod.py",
            2,
            "`pkg.mod.helper`, `pkg.mod.TABLE` not defined back: its pre-fix code reads "
            "`gone`, which the revert does not define",
        ),
    )


def test_an_entry_reading_what_a_dropped_entry_defined_is_checked_again_and_listed(
    tmp_path: Path,
) -> None:
    # The module's entry loses TABLE (it reads `gone`); the class's entry defines a method
    # reading TABLE: checked once, it passed with TABLE still in the module's entry, and
    # the run refused the whole recipe.
    root = tree_with_module(tmp_path, "class Layer:\n    def forward(self):\n        return 1\n")
    module = DraftNames("pkg.mod", "from os import sep\nTABLE = {'a': gone}\n", (), "pkg/mod.py", 1)
    member = DraftNames(
        "pkg.mod.Layer", "    def attend(self):\n        return TABLE['a']\n", (), "pkg/mod.py", 2
    )
    checked = checked_recipe(
        RecipeHeader(11, "t"),
        Draft(files=["pkg/mod.py"], names=[module, member]),
        path=tmp_path / "out" / "11.yaml",
        roots=[open_source_tree(root)],
    )
    assert [(n.scope, n.define) for n in checked.names] == [("pkg.mod", "from os import sep\n")]
    assert [(c.line, c.reason) for c in checked.not_reverted] == [
        (
            1,
            "`pkg.mod.TABLE` not defined back: its pre-fix code reads `gone`, which the "
            "revert does not define",
        ),
        (
            2,
            "`pkg.mod.Layer.attend` not defined back: its pre-fix code reads `TABLE`, which "
            "the revert does not define",
        ),
    ]

"""Tests for `check` of names and not_reverted: on a source tree and on the imported modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from revert_fixtures import ModuleFactory, clean_toggle_state, modules_fixture, write_fix  # noqa: F401

from prtoggle.patching.source_files import open_source_tree
from prtoggle.recipes.check import check_recipe
from prtoggle.recipes.schema import load_recipe

CORE = """\
LIMIT = 8192


def new_helper(x):
    return x * 2


def compute(x):
    return new_helper(x) + LIMIT


class Child:
    def forward(self):
        return 1
"""
RECIPE = """\
pr: 931
patches:
  - target: app.core.compute
    edits:
      - match: return new_helper(x) + LIMIT
        replacement: return {helper}(x) + LIMIT
names:
  - scope: app.core
    define: |
      def _old_helper(x):
          return x + 1
    remove: [{remove}]
  - scope: {class_scope}
    remove: [forward]
not_reverted:
  - file: app/core.py
    line: {line}
    code: "{code}"
    reason: a decorator changed
"""


def statuses(
    modules: ModuleFactory, tmp_path: Path, *, live: bool, **changes: object
) -> list[tuple[str, str, str]]:
    modules.write("app.core", CORE)
    values = {
        "helper": "_old_helper",
        "remove": "new_helper",
        "class_scope": "app.core.Child",
        "line": 8,
        "code": "def compute(x):",
        **changes,
    }
    fix = load_recipe(write_fix(tmp_path / "reg", 931, RECIPE.format(**values)))
    tree = None if live else open_source_tree(modules.root)
    return [
        (check.target, check.status, check.message.replace(str(modules.root), "SRC"))
        for check in check_recipe(fix, tree=tree)
    ]


@pytest.mark.parametrize("live", [False, True])
def test_a_whole_recipe_checks_ok_statically_and_live(
    modules: ModuleFactory, tmp_path: Path, live: bool
) -> None:
    assert statuses(modules, tmp_path, live=live) == [
        ("app.core.compute", "ok", ""),
        ("names:app.core", "ok", ""),
        ("names:app.core.Child", "ok", ""),
        ("not_reverted:app/core.py:8", "ok", ""),
    ]


@pytest.mark.parametrize("live", [False, True])
def test_stale_names_and_kept_changes_are_reported(
    modules: ModuleFactory, tmp_path: Path, live: bool
) -> None:
    found = statuses(
        modules,
        tmp_path,
        live=live,
        remove="gone",
        class_scope="app.core.Parent",
        line=99,
    )
    assert found[1:3] == [
        (
            "names:app.core",
            "stale",
            "remove: `gone` is not bound at the top level of module app.core",
        ),
        (
            "names:app.core.Parent",
            "stale",
            "app.core.Parent: SRC/app/core.py has no class 'Parent' at its top level"
            if not live
            else "app.core.Parent: module app.core has no class 'Parent'",
        ),
    ]
    assert found[3] == (
        "not_reverted:app/core.py:99",
        "stale",
        "SRC/app/core.py: line 99 is past its end (14 lines)",
    )
    missing_code = statuses(modules, tmp_path, live=live, code="@torch.compile")[3]
    assert missing_code[1:] == ("stale", "SRC/app/core.py: '@torch.compile' is not in the file")


@pytest.mark.parametrize("live", [False, True])
def test_the_global_check_fails_an_edit_reading_a_name_the_revert_leaves_undefined(
    modules: ModuleFactory, tmp_path: Path, live: bool
) -> None:
    found = statuses(modules, tmp_path, live=live, helper="_older_helper")
    assert found[1] == (
        "names:app.core",
        "error",
        "app.core.compute reads `_older_helper`, not defined in module app.core after the "
        "revert (nor a builtin)",
    )


ANNOTATED = """\
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.types import NodeId
"""
ANNOTATED_RECIPE = """\
pr: 933
names:
  - scope: app.annotated
    define: |
      def lookup(node: NodeId) -> NodeId:
          return node
      class Record:
          size: int = 0
"""


@pytest.mark.parametrize("live", [False, True])
def test_annotations_are_no_global_reads_where_they_are_never_evaluated(
    modules: ModuleFactory, tmp_path: Path, live: bool
) -> None:
    # Under `from __future__ import annotations` an annotation is a string; a class body's
    # annotations go to the `__annotations__` the body sets up itself.
    modules.write("app.annotated", ANNOTATED)
    if live:
        modules.load("app.annotated", ANNOTATED)
    fix = load_recipe(write_fix(tmp_path / "reg", 933, ANNOTATED_RECIPE))
    tree = None if live else open_source_tree(modules.root)
    found = [(c.target, c.status, c.message) for c in check_recipe(fix, tree=tree)]
    assert found == [("names:app.annotated", "ok", "")]

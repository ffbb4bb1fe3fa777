"""Tests for the `names:`, `not_reverted:` and `guards:` keys: loaded to their types, by line."""

from __future__ import annotations

from pathlib import Path

import pytest
from revert_fixtures import write_fix

from prtoggle.errors import RegistryError
from prtoggle.recipes.schema import NameChange, NotReverted, load_recipe

HEAD = "pr: 31769\ntitle: t\n"
PATCHES = """\
patches:
  - target: app.core.compute
    edits:
      - match: return 1
        replacement: return 2
"""


def load(tmp_path: Path, body: str) -> object:
    return load_recipe(write_fix(tmp_path / "reg", 31769, HEAD + body))


def refusal(tmp_path: Path, body: str) -> str:
    with pytest.raises(RegistryError) as caught:
        load(tmp_path, body)
    return str(caught.value).replace(str(tmp_path / "reg" / "31769.yaml"), "R")


def test_names_and_not_reverted_load_to_their_dataclasses(tmp_path: Path) -> None:
    recipe = load(
        tmp_path,
        PATCHES
        + """\
names:
  - scope: app.core
    define: |
      from app.utils import is_cuda
      _MAX_CHUNK: int = 4096
      def _old_helper(x):
          return x + 1
    remove: [new_helper, NEW_FLAG]
  - scope: app.core.Bar
    remove: [forward_extend]
not_reverted:
  - file: app/core.py
    line: 120
    code: "@torch.compile"
    reason: decorator of Bar.forward changed
""",
    )
    assert recipe.names == (  # type: ignore[attr-defined]
        NameChange(
            scope="app.core",
            define="from app.utils import is_cuda\n_MAX_CHUNK: int = 4096\n"
            "def _old_helper(x):\n    return x + 1\n",
            remove=("new_helper", "NEW_FLAG"),
            line=9,
            define_line=11,
        ),
        NameChange(
            scope="app.core.Bar", define="", remove=("forward_extend",), line=16, define_line=16
        ),
    )
    assert recipe.names[0].defined == ("is_cuda", "_MAX_CHUNK", "_old_helper")  # type: ignore[attr-defined]
    assert recipe.not_reverted == (  # type: ignore[attr-defined]
        NotReverted(
            file="app/core.py", line=120, reason="decorator of Bar.forward changed",
            code="@torch.compile",
        ),
    )  # fmt: skip
    assert recipe.partial  # type: ignore[attr-defined]


def test_a_recipe_of_names_only_needs_no_patches_and_is_whole(tmp_path: Path) -> None:
    recipe = load(tmp_path, "names:\n  - scope: app.core\n    define: 'LIMIT = 1'\n")
    assert recipe.patches == () and not recipe.partial  # type: ignore[attr-defined]
    assert recipe.names[0].define_line == 5  # type: ignore[attr-defined]
    assert recipe.top_levels == ("app",)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "names:\n  - scope: app.core\n    define: |\n      X = 1\n      print(X)\n",
            "R:7: define of app.core: a Expr statement is not allowed; expected one of: import, "
            "from X import a [as b], NAME = expr, NAME: T = expr, def, async def, class",
        ),
        (
            "names:\n  - scope: app.core\n    define: |\n      def f(:\n",
            "R:6: define of app.core: does not parse: invalid syntax",
        ),
        (
            "names:\n  - scope: app.core\n",
            "R:4: names entry of app.core has neither 'define' nor 'remove'; give at least one",
        ),
        (
            "names:\n  - scope: app.core\n    define: X = 1\n    remove: [X]\n",
            "R:6: names entry of app.core both defines and removes 'X'; a name is either bound "
            "to its pre-fix value or removed",
        ),
        (
            "names:\n  - scope: app.core\n    remove: [a.b]\n",
            "R:5: 'remove' must be a non-empty list of identifiers like [new_helper, NEW_FLAG], "
            "got ['a.b']",
        ),
        (
            "names:\n  - scope: app.core\n    remove: [x]\n    extra: 1\n",
            "R:6: unknown key 'extra' in names entry; expected one of: scope, define, remove",
        ),
        (
            "names:\n  - scope: __main__\n    remove: [x]\n",
            "R:4: 'scope' must be a dotted module or module.Class (not __main__), got '__main__'",
        ),
        (
            PATCHES + "not_reverted:\n  - file: a.py\n    line: 0\n    reason: r\n",
            "R:10: 'line' must be a line number >= 1, got int 0",
        ),
        (
            PATCHES + "not_reverted:\n  - file: a.py\n    line: 3\n",
            "R:9: not_reverted entry is missing required key 'reason'; required keys: file, "
            "line, reason",
        ),
        (
            "title2: x\n",
            "R:3: unknown key 'title2' in fix file; expected one of: patches, pr, title, url, "
            "merged, component, symptom, expect, repro, bench, verified_on, applies_to, names, "
            "not_reverted, guards, added_modules",
        ),
    ],
)
def test_malformed_names_and_not_reverted_name_the_file_and_line(
    tmp_path: Path, body: str, message: str
) -> None:
    assert refusal(tmp_path, body) == message


def test_guards_load_as_node_ids_and_files_in_their_order(tmp_path: Path) -> None:
    recipe = load(
        tmp_path,
        PATCHES
        + """\
guards:
  - test/registered/unit/x/test_y.py::TestY::test_z
  - test/registered/unit/x/test_y.py::test_fn
  - test/registered/unit/x/test_module_level.py
  - tests/test_p.py::test_case[a-1]
""",
    )
    assert recipe.guards == (  # type: ignore[attr-defined]
        "test/registered/unit/x/test_y.py::TestY::test_z",
        "test/registered/unit/x/test_y.py::test_fn",
        "test/registered/unit/x/test_module_level.py",
        "tests/test_p.py::test_case[a-1]",
    )
    assert load(tmp_path, PATCHES).guards == ()  # type: ignore[attr-defined]


_EXPECTED = (
    "; expected a pytest node id or a test file path like 'test/unit/test_x.py::TestX::test_y'"
)


@pytest.mark.parametrize(
    ("guards", "message"),
    [
        (
            "guards: test/a.py",
            "R:8: 'guards' must be a list of pytest node ids or test file paths like "
            "'test/unit/test_x.py::TestX::test_y', got 'test/a.py'",
        ),
        ("guards: [3]", "R:8: 'guards' entry 3 is not a non-empty string" + _EXPECTED),
        (
            "guards: [/abs/test_a.py]",
            "R:8: 'guards' entry '/abs/test_a.py' is not relative to the repository root "
            "(posix '/', no leading '/', no '..')" + _EXPECTED,
        ),
        (
            "guards: [test/../x/test_a.py]",
            "R:8: 'guards' entry 'test/../x/test_a.py' is not relative to the repository root "
            "(posix '/', no leading '/', no '..')" + _EXPECTED,
        ),
        (
            "guards: ['test\\a\\test_a.py']",
            "R:8: 'guards' entry 'test\\\\a\\\\test_a.py' is not relative to the repository "
            "root (posix '/', no leading '/', no '..')" + _EXPECTED,
        ),
        (
            "guards: [test/a.txt]",
            "R:8: 'guards' entry 'test/a.txt' does not name a .py file" + _EXPECTED,
        ),
        (
            "guards: ['test/test_a.py::TestA::test b']",
            "R:8: 'guards' entry 'test/test_a.py::TestA::test b' has a part after '::' that is "
            "not a test or class name" + _EXPECTED,
        ),
        (
            "guards: [test/test_a.py::test_x, test/test_a.py::test_x]",
            "R:8: 'guards' lists 'test/test_a.py::test_x' twice; each test once",
        ),
    ],
)
def test_malformed_guards_name_the_file_line_and_expectation(
    tmp_path: Path, guards: str, message: str
) -> None:
    assert refusal(tmp_path, PATCHES + guards + "\n") == message

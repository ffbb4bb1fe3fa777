"""command_imports: the modules a command's own files import at their top, read from the
files on disk (pytest's test files and conftest.py files, a script, -c code)."""

from __future__ import annotations

import sys
from pathlib import Path

from prtoggle.runners.command_imports import command_imports, command_lazy_imports

TEST_FILE = """\
import os
from shop.prices import Cart
from . import helpers
try:
    import shop.fast as fast
except ImportError:
    import shop.slow
if os.name:
    from shop.posix import thing


def test_cart():
    import shop.lazy  # inside a function: not at the top
"""


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "conftest.py").write_text("import shop.fixtures\n")
    (tmp_path / "tests" / "unit" / "test_cart.py").write_text(TEST_FILE)
    (tmp_path / "conftest.py").write_text("import shop.root\n")
    return tmp_path


def test_pytest_node_ids_name_their_files_conftests_first_and_top_level_imports_only(
    tmp_path: Path,
) -> None:
    root = _tree(tmp_path)
    argv = [sys.executable, "-m", "pytest", "-q", "tests/unit/test_cart.py::test_cart", "-x"]
    assert command_imports(argv, cwd=root) == [
        "shop.fixtures",
        "shop.root",
        "os",
        "shop.prices",
        "shop.fast",
        "shop.slow",
        "shop.posix",
    ]


def test_a_script_and_code_are_read_and_other_commands_give_nothing(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "run.py").write_text("import shop.cli\nfrom shop import prices\n")
    assert command_imports([sys.executable, "run.py"], cwd=root) == ["shop.cli", "shop"]
    assert command_imports([sys.executable, "-c", "import shop.x; f()"], cwd=root) == ["shop.x"]
    assert command_imports([sys.executable, "-m", "shop.server"], cwd=root) == []
    assert command_imports(["bash", "-c", "import shop"], cwd=root) == []
    (root / "broken.py").write_text("import (\n")
    assert command_imports([sys.executable, "broken.py"], cwd=root) == []
    assert command_imports([sys.executable, "absent.py"], cwd=root) == []


LAZY_TEST_FILE = """\
import shop.prices


def helper():
    import shop.helping


def test_named():
    from shop.named import thing


def test_other():
    import shop.other


class TestBox:
    def setUp(self):
        import shop.box_setup

    def test_box_named(self):
        import shop.box_named

    def test_box_other(self):
        import shop.box_other

    def test_top_again(self):
        import shop.prices


class TestUnnamed:
    def setUp(self):
        import shop.unnamed_setup
"""


def test_imports_inside_the_named_tests_and_their_helpers_are_read_the_others_are_not(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text("def fixture():\n    import shop.from_fixture\n")
    (tmp_path / "test_lazy.py").write_text(LAZY_TEST_FILE)
    pytest = [sys.executable, "-m", "pytest", "-x"]
    nodes = ["test_lazy.py::test_named", "test_lazy.py::TestBox::test_box_named[1]"]
    assert command_lazy_imports([*pytest, *nodes], cwd=tmp_path) == [
        "shop.from_fixture",
        "shop.helping",
        "shop.named",
        "shop.box_setup",
        "shop.box_named",
    ]
    whole_class = command_lazy_imports([*pytest, "test_lazy.py::TestBox"], cwd=tmp_path)
    assert whole_class == [
        "shop.from_fixture",
        "shop.helping",
        "shop.box_setup",
        "shop.box_named",
        "shop.box_other",
    ]  # shop.prices: imported at the top already
    every = command_lazy_imports([*pytest, "test_lazy.py", *nodes], cwd=tmp_path)
    assert "shop.other" in every and "shop.unnamed_setup" in every
    assert command_lazy_imports([sys.executable, "-c", "import shop"], cwd=tmp_path) == []

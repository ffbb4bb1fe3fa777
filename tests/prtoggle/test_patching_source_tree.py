"""Tests for prtoggle.patching.source_tree: finding definitions by module path and AST."""

from __future__ import annotations
import __future__

from pathlib import Path

import pytest

from prtoggle.errors import TargetResolutionError
from prtoggle.patching.compiler import FunctionShape
from prtoggle.patching.source_tree import find_in_source_tree

TREE_MODULE = """\
from __future__ import annotations

import typing


class Outer:
    class Inner:
        @typing.overload
        def pick(self, a: int) -> int: ...

        def pick(self, a):
            return a

    @property
    def size(self):
        return 1

    @size.setter
    def size(self, value):
        pass


def plain():
    return 0
"""


def tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(TREE_MODULE)
    return tmp_path


def test_nested_class_method_skips_overload_stubs(tmp_path: Path) -> None:
    source = find_in_source_tree("pkg.mod.Outer.Inner.pick", source_root=tree(tmp_path))
    assert (source.first_line, source.text) == (
        11,
        "        def pick(self, a):\n            return a\n",
    )
    assert source.shape == FunctionShape(
        name="pick",
        class_name="Inner",
        freevars=None,
        future_flags=__future__.annotations.compiler_flag,
    )


def test_property_resolves_to_its_getter_not_its_setter(tmp_path: Path) -> None:
    source = find_in_source_tree("pkg.mod.Outer.size", source_root=tree(tmp_path))
    assert (source.first_line, source.filename) == (14, str(tmp_path / "pkg" / "mod.py"))


def test_walking_into_a_function_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TargetResolutionError) as caught:
        find_in_source_tree("pkg.mod.plain.inner", source_root=tree(tmp_path))
    assert str(caught.value) == (
        f"pkg.mod.plain.inner: {tmp_path / 'pkg' / 'mod.py'}:23: plain is not a class, so it "
        "cannot hold 'inner'"
    )


def test_naming_a_class_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TargetResolutionError) as caught:
        find_in_source_tree("pkg.mod.Outer.Inner", source_root=tree(tmp_path))
    assert str(caught.value) == (
        f"pkg.mod.Outer.Inner: {tmp_path / 'pkg' / 'mod.py'}: Inner is a class, not a function"
    )


def test_a_file_that_does_not_parse_is_reported_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("x = 1\ndef f(:\n    pass\n")
    with pytest.raises(TargetResolutionError) as caught:
        find_in_source_tree("bad.f", source_root=tmp_path)
    assert str(caught.value) == f"bad.f: {tmp_path / 'bad.py'}:2 does not parse: invalid syntax"

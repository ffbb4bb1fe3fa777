"""Tests for prtoggle.patching.source_tree: finding definitions by module path and AST."""

from __future__ import annotations
import __future__

import ast
import gc
import importlib
import inspect
import io
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from prtoggle.errors import TargetResolutionError
from prtoggle.patching.compiler import FunctionShape
from prtoggle.patching.source_files import open_source_tree
from prtoggle.patching.source_tree import find_in_source_tree, module_level_names

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
        freevars=(),
        future_flags=__future__.annotations.compiler_flag,
    )


CLASS_CELLS = """\
class Base:
    def hello(self):
        return "base"


class Plain(Base):
    def hello(self):
        return Base.hello(self)


class Named(Base):
    @staticmethod
    def helper():
        return 1

    def hello(self):
        def inner():
            return super(Named, self).hello()

        return inner()


class Spelled(Base):
    def hello(self):
        return \uff53uper().hello()  # a fullwidth s: NFKC makes the name plain ASCII
"""


@pytest.mark.parametrize(("cls", "cell"), [("Plain", False), ("Named", True), ("Spelled", True)])
def test_a_method_closes_over_its_class_exactly_when_the_live_one_does(
    tmp_path: Path, cls: str, cell: bool
) -> None:
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "__init__.py").write_text("")
    (tmp_path / "cells" / "mod.py").write_text(CLASS_CELLS, encoding="utf-8")
    source = find_in_source_tree(f"cells.mod.{cls}.hello", source_root=tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(CLASS_CELLS, "cells.py", "exec"), namespace)
    live = vars(namespace[cls])["hello"]
    assert ("__class__" in live.__code__.co_freevars) is cell
    assert source.shape.freevars == (("__class__",) if cell else ())


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


TRAILING_COMMENT_MODULE = """\
import functools


@functools.lru_cache(maxsize=None)
def cached(x):
    if x:
        return 1
        # an indented comment after the last statement
    return 0
    # another, at body level

# at column 0: not part of the function
def after():
    pass
"""


def test_the_static_text_is_exactly_what_inspect_getsource_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "trailing.py").write_text(TRAILING_COMMENT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import trailing  # type: ignore[import-not-found]

    static = find_in_source_tree("trailing.cached", source_root=tmp_path)
    assert static.text == inspect.getsource(trailing.cached.__wrapped__)
    assert static.text.endswith("    # another, at body level\n")
    assert static.first_line == 4


EDGE_MODULES = {
    "comment_after_the_next_decorator": "def d(g):\n    return g\n\ndef f():\n    return 1\n"
    "@d\n    # between a decorator and its def\ndef g():\n    pass\n",
    "backslash_last": "def f():\n    x = 1 + \\\n        2\n    return x\n    # c\n\ny = 2\n",
    "backslash_blank": "def f():\n    return 1 \\\n\ny = 2\n",
    "backslash_header": "def f(): \\\n    return 1\n    # c\ny = 2\n",
    "one_liner_comment": "def f(): return 1\n    # indented comment\ny = 2\n",
    "nested_end": "def f(a):\n    if a:\n        return 1\n            # deeper\n    # body level\n"
    "  # shallower\n# col0\n    # again\ny = 2\n",
    "tabs": "def f():\n\treturn 1\n\t# tab\n        # eight spaces\n    # four\ny = 2\n",
    "form_feed": "def f():\n    return 1\n\x0c    # after a form feed\ny = 2\n",
    "trailing_spaces_at_the_end": "def f():\n    return 1\n   ",
    "decorated_first_statement": "def d(g):\n    return g\n\ndef f():\n    @d\n    def g():\n"
    "        return 1\n    return g()\n    # c\ny = 2\n",
    "carriage_returns": "def f():\r\n    return 1\r\n    # c\r\ny = 2\r\n",
    "docstring_only": 'def f():\n    """doc\n    # not a comment\n    """\n    # c\n',
    "comment_inside_parentheses": "def f():\n    return (1,\n# col0\n    2)\n    # c\n",
    "byte_order_mark": "\ufeffdef f():\n    return 1\n",
}


@pytest.mark.parametrize("name", sorted(EDGE_MODULES))
def test_the_static_text_is_what_inspect_getsource_gives_at_token_edge_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    (tmp_path / f"{name}.py").write_bytes(EDGE_MODULES[name].encode())
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    static = find_in_source_tree(f"{name}.f", source_root=tmp_path)
    assert static.text == inspect.getsource(module.f)


LAST_METHOD_MODULE = """\
class Holder:
    def first(self):
        return 0

    def last(self):
        return 1
        # a trailing comment, indented like the body
x = 1
"""


def test_the_last_method_of_a_class_keeps_its_trailing_comment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "holder.py").write_text(LAST_METHOD_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import holder  # type: ignore[import-not-found]

    static = find_in_source_tree("holder.Holder.last", source_root=tmp_path)
    assert static.text == inspect.getsource(holder.Holder.last)
    assert static.text.endswith("        # a trailing comment, indented like the body\n")


@pytest.mark.parametrize("enabled", [True, False])
def test_parsing_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path, enabled: bool) -> None:
    (tmp_path / "bad.py").write_text("def f(:\n    pass\n")
    was = gc.isenabled()
    try:
        if not enabled:
            gc.disable()
        find_in_source_tree("pkg.mod.plain", source_root=tree(tmp_path))
        with pytest.raises(TargetResolutionError):
            find_in_source_tree("bad.f", source_root=tmp_path)
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()


def test_module_level_names_cover_imports_definitions_and_assignments() -> None:
    tree = ast.parse(
        "import os.path\nfrom a import b as c\nX = 1\nif X:\n    Y: int = 2\n"
        "try:\n    import z\nexcept ImportError:\n    z = None\ndef f(): pass\nclass K: pass\n"
    )
    assert module_level_names(tree) == frozenset({"os", "c", "X", "Y", "z", "f", "K"})
    assert module_level_names(ast.parse("from m import *\n")) is None


def make_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("pkg/__init__.py", "")
        wheel.writestr("pkg/mod.py", TREE_MODULE)
        wheel.writestr("pkg-1.0.dist-info/METADATA", "Name: pkg\n")
    return path


def make_sdist(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as sdist:
        for name, text in (
            ("pkg-1.0/python/pkg/__init__.py", ""),
            ("pkg-1.0/python/pkg/mod.py", TREE_MODULE),
        ):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            sdist.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    ("archive", "member"),
    [
        (lambda p: make_wheel(p / "pkg-1.0-py3-none-any.whl"), "pkg/mod.py"),
        (lambda p: make_sdist(p / "pkg-1.0.tar.gz"), "pkg-1.0/python/pkg/mod.py"),
    ],
)
def test_wheels_and_sdists_are_read_in_place(
    tmp_path: Path, archive: Callable[[Path], Path], member: str
) -> None:
    path = archive(tmp_path)
    source = find_in_source_tree("pkg.mod.plain", source_root=path)
    assert (source.filename, source.first_line, source.text) == (
        f"{path}!{member}",
        23,
        "def plain():\n    return 0\n",
    )
    tree = open_source_tree(path)
    assert (tree.has_package("pkg"), tree.has_package("other")) == (True, False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing extracted


def test_a_file_that_is_no_archive_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("x")
    with pytest.raises(TargetResolutionError) as caught:
        open_source_tree(path)
    assert str(caught.value) == (
        f"--source-root {path}: expected a directory, a wheel (.whl) or an sdist "
        "(.tar.gz, .tgz, .tar)"
    )

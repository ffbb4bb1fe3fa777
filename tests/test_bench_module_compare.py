"""bench/module_compare.py, the import oracle of whole fixes: it sees what a revert left.

A module file loaded twice compares whole; each kind of difference a revert can leave
(code, a constant, a default, a value read at load, a class member, a name) is reported.
"""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from module_compare import compare_modules, load_module_file

SOURCE = """\
import functools
import logging

logger = logging.getLogger(__name__)
_MAX = 8
_LIMIT = _MAX * 2


def size(n=_MAX):
    return [n, "text"]


@functools.lru_cache(maxsize=None)
def cached(x):
    return x


class Holder:
    cap = _MAX

    def get(self, k=1):
        return k

    @property
    def value(self):
        return self.cap
"""


def load(tmp_path: Path, text: str, name: str) -> object:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return load_module_file("demo_mod", path)


def test_two_loads_of_one_file_compare_whole(tmp_path: Path) -> None:
    first, second = load(tmp_path, SOURCE, "a"), load(tmp_path, SOURCE, "b")
    assert compare_modules(first, second).differs == {}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('"text"', '"other"', {"size": "size: co_consts differ ('other' for 'text')"}),
        ("def size(n=_MAX)", "def size(n=9)", {"size": "defaults: [0]: 9 for 8"}),
        (
            "_MAX = 8",
            "_MAX = 4",
            {
                "_MAX": "4 for 8",
                "_LIMIT": "8 for 16",  # what the module computed from it at load, too
                "size": "defaults: [0]: 4 for 8",
                "Holder": "member cap: 4 for 8",
            },
        ),
        ("    cap = _MAX\n", "    cap = 1\n", {"Holder": "member cap: 1 for 8"}),
        ("return self.cap", "return 0", {"Holder": "member value: fget: value: co_code differs"}),
        ("return x\n", "return -x\n", {"cached": "cached: co_code differs"}),
        ("logger =", "_logger =", {"logger": "removed by the fix", "_logger": "added by the fix"}),
    ],
)
def test_each_kind_of_difference_is_reported_by_name(
    tmp_path: Path, old: str, new: str, expected: dict[str, str]
) -> None:
    assert old in SOURCE
    pre, reverted = load(tmp_path, SOURCE, "pre"), load(tmp_path, SOURCE.replace(old, new), "rev")
    assert compare_modules(pre, reverted).differs == expected  # type: ignore[arg-type]


def test_code_differing_only_in_line_marking_nops_is_the_same(tmp_path: Path) -> None:
    # A revert numbers inserted lines as the first matched line, so a NOP that marks a
    # line of its own (a `try:`) can go: the same instructions, other co_code bytes.
    text = "def f(x):\n    try:\n        return g(x)\n    except KeyError:\n        return 0\n"
    pre = load(tmp_path, text, "pre")
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if hasattr(node, "lineno"):
            node.lineno = node.end_lineno = 1  # type: ignore[attr-defined]
    reverted = types.ModuleType("demo_mod")
    exec(compile(tree, "rev.py", "exec"), vars(reverted))
    assert pre.f.__code__.co_code != reverted.f.__code__.co_code  # type: ignore[attr-defined]
    assert compare_modules(pre, reverted).differs == {}  # type: ignore[arg-type]


def test_an_annotation_left_by_a_removed_name_is_reported_in_modules_and_classes(
    tmp_path: Path,
) -> None:
    # A fix adding `B: int = 2` is reverted by removing B: its __annotations__ entry stays.
    pre = load(tmp_path, "A = 1\n\n\nclass C:\n    x = 1\n", "pre")
    after = "A = 1\nB: int = 2\n\n\nclass C:\n    x = 1\n    y: int = 2\n"
    reverted = load(tmp_path, after, "rev")
    del reverted.B  # type: ignore[attr-defined]
    del reverted.C.y  # type: ignore[attr-defined]
    assert compare_modules(pre, reverted).differs == {  # type: ignore[arg-type]
        "__annotations__": "annotation of B: added by the fix",
        "C": "member __annotations__: annotation of y: added by the fix",
    }
    reverted.__annotations__.pop("B")
    reverted.C.__annotations__.pop("y")  # type: ignore[attr-defined]
    assert compare_modules(pre, reverted).differs == {}  # type: ignore[arg-type]

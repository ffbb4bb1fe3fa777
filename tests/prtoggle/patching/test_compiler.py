"""Tests for prtoggle.patching.compiler: real file lines in tracebacks, closures, diagnostics."""

from __future__ import annotations

import traceback
from types import FunctionType

import pytest
from revert_fixtures import ModuleFactory, make_patch, modules_fixture  # noqa: F401

from prtoggle.errors import PatchApplicationError, UnsupportedTargetError
from prtoggle.patching.swap import CodeSwapper, EditLayer
from prtoggle.patching.targets import ResolvedTarget, resolve_loaded

LINES_MODULE = """\
from __future__ import annotations


def check(a: int) -> int:
    b = a + 1
    c = b * 2
    if c > 10:
        raise ValueError("too big")
    return c


class Child(dict):
    def get(self, key):
        value = super().get(key)
        return value


def outer():
    scale = 2

    def inner(a):
        return a * scale
    return inner
"""


def patch_function(target: str, *edits: tuple[str, str, str]) -> FunctionType:
    resolved = resolve_loaded(target)
    assert isinstance(resolved, ResolvedTarget)
    layer = EditLayer(pr=5, patch=make_patch(target, *edits), yaml_path="/reg/5.yaml")
    CodeSwapper().patch(resolved.function, layer)
    return resolved.function


def raising_line(function: FunctionType, *args: object) -> tuple[str, int]:
    with pytest.raises(ValueError) as caught:
        function(*args)
    frame = traceback.extract_tb(caught.value.__traceback__)[-1]
    assert frame.lineno is not None
    return frame.filename, frame.lineno


def test_raise_below_inserted_lines_reports_its_real_file_line(modules: ModuleFactory) -> None:
    path = modules.write("lines", LINES_MODULE)
    modules.load("lines", LINES_MODULE)
    check = patch_function("lines.check", ("c = b * 2", "prepend", "b = b * 10\nb = b + 1"))
    assert raising_line(check, 1) == (str(path), 8)


def test_raise_below_deleted_lines_reports_its_real_file_line(modules: ModuleFactory) -> None:
    path = modules.write("lines", LINES_MODULE)
    modules.load("lines", LINES_MODULE)
    check = patch_function("lines.check", ("b = a + 1\nc = b * 2", "replacement", "c = 99"))
    assert raising_line(check, 1) == (str(path), 8)


def test_raise_from_an_inserted_line_reports_the_line_of_the_match(
    modules: ModuleFactory,
) -> None:
    path = modules.write("lines", LINES_MODULE)
    modules.load("lines", LINES_MODULE)
    check = patch_function(
        "lines.check", ("return c", "replacement", 'x = 1\nraise ValueError("reverted")')
    )
    assert raising_line(check, 1) == (str(path), 9)


def test_future_annotations_of_the_module_still_apply(modules: ModuleFactory) -> None:
    modules.load("lines", LINES_MODULE)
    check = patch_function("lines.check", ("c = b * 2", "replacement", "c = b"))
    assert check.__annotations__ == {"a": "int", "return": "int"}
    assert check(3) == 4


def test_dropping_super_is_refused_because_the_class_cell_would_go(
    modules: ModuleFactory,
) -> None:
    modules.load("lines", LINES_MODULE)
    with pytest.raises(UnsupportedTargetError) as caught:
        patch_function(
            "lines.Child.get",
            ("value = super().get(key)", "replacement", "value = dict.get(self, key)"),
        )
    assert str(caught.value) == (
        "lines.Child.get: the edited code uses free variables () but the original uses "
        "('__class__',); an edit may not add or drop uses of closure variables (or of "
        "super()/__class__)"
    )


def test_adding_a_closure_use_is_refused_and_the_function_keeps_working(
    modules: ModuleFactory,
) -> None:
    module = modules.load("lines", LINES_MODULE)
    inner = module.outer()
    resolved_layer = EditLayer(
        pr=5,
        patch=make_patch("lines.outer.inner", ("return a * scale", "replacement", "return a")),
        yaml_path="/reg/5.yaml",
    )
    with pytest.raises(UnsupportedTargetError) as caught:
        CodeSwapper().patch(inner, resolved_layer)
    assert str(caught.value).startswith(
        "lines.outer.inner: the edited code uses free variables () but the original uses ('scale',)"
    )
    assert inner(3) == 6


def test_edit_that_breaks_syntax_names_the_real_line(modules: ModuleFactory) -> None:
    path = modules.write("lines", LINES_MODULE)
    modules.load("lines", LINES_MODULE)
    with pytest.raises(PatchApplicationError) as caught:
        patch_function("lines.check", ("if c > 10:", "replacement", "if c > 10"))
    assert str(caught.value) == (
        f"lines.check: the edited source does not compile: expected ':' at {path}:7 "
        "(edited line 4 of 6: 'if c > 10')"
    )


def test_edit_that_adds_a_second_statement_is_refused(modules: ModuleFactory) -> None:
    modules.load("lines", LINES_MODULE)
    with pytest.raises(PatchApplicationError) as caught:
        patch_function("lines.check", ("def check(a: int) -> int:", "prepend", "x = 1"))
    assert str(caught.value) == (
        "lines.check: the edited source must be exactly one definition of check(); it holds: "
        "Assign, FunctionDef; code outside the def's signature and body cannot take effect "
        "through a code swap"
    )


def test_edit_rejected_by_the_compiler_after_parsing_is_reported(modules: ModuleFactory) -> None:
    path = modules.write("lines", LINES_MODULE)
    modules.load("lines", LINES_MODULE)
    with pytest.raises(PatchApplicationError) as caught:
        patch_function("lines.check", ("b = a + 1", "prepend", "nonlocal q"))
    assert str(caught.value) == (
        "lines.check: the edited source does not compile: no binding for nonlocal 'q' found "
        f"at {path}:5"
    )

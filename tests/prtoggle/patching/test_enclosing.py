"""Tests for prtoggle.patching.enclosing: the variables of enclosing functions."""

from __future__ import annotations

from prtoggle.patching.enclosing import enclosing_variables

BEFORE = """\
def outer():
    a = 1

    def inner():
        return 0

    return inner
"""


def test_the_variables_follow_the_file_text_not_only_its_name() -> None:
    found = enclosing_variables(BEFORE, qualname="outer.<locals>.inner", filename="m.py")
    after = BEFORE.replace("a = 1", "b = 1")
    changed = enclosing_variables(after, qualname="outer.<locals>.inner", filename="m.py")
    assert (found, changed) == (
        (("a", "outer"), ("inner", "outer")),
        (("b", "outer"), ("inner", "outer")),
    )


def test_a_method_of_a_top_level_class_has_no_enclosing_variables() -> None:
    text = "class C:\n    x = 1\n\n    def m(self):\n        return 0\n"
    assert enclosing_variables(text, qualname="C.m", filename="m.py") == ()


def test_a_file_that_does_not_parse_has_no_enclosing_variables() -> None:
    assert enclosing_variables("def f(:\n", qualname="f.<locals>.g", filename="m.py") == ()

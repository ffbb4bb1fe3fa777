"""Tests for prtoggle.patching.definition: a revert carries the def line or is refused."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from revert_fixtures import (  # noqa: F401
    ModuleFactory,
    edit_layer,
    loaded_function,
    make_patch,
    modules_fixture,
)

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.patching.swap import CodeSwapper, build_replacement

SIGNATURES_MODULE = """\
SENTINEL = []
LIMIT = 10


def tag(function):
    function.tagged = True
    return function


def scale(x, factor=2, bucket=SENTINEL, *, offset=0):
    return x * factor + offset


@tag
def tagged(x):
    return x + 1


def typed(x: int, y: int = 1) -> int:
    return x + y


class Holder:
    STEP = 3

    def step(self, x, by=1):
        return x + by
"""


SCALE_HEADER = "def scale(x, factor=2, bucket=SENTINEL, *, offset=0):"


def test_an_added_parameter_with_a_default_works_and_the_signature_agrees(
    modules: ModuleFactory,
) -> None:
    module = modules.load("sigs", SIGNATURES_MODULE)
    target = loaded_function("sigs.scale")
    before = (target.__code__, target.__defaults__, target.__kwdefaults__, target.__annotations__)
    swapper = CodeSwapper()
    swapper.patch(
        target,
        edit_layer(
            "sigs.scale",
            (
                SCALE_HEADER,
                "replacement",
                "def scale(x, factor=2, bucket=SENTINEL, bias=LIMIT + 1, *, offset=0, extra=5):",
            ),
            ("return x * factor + offset", "replacement", "return x * factor + offset + bias"),
        ),
    )
    assert module.scale(1) == 13
    assert str(inspect.signature(module.scale)) == (
        "(x, factor=2, bucket=[], bias=11, *, offset=0, extra=5)"
    )
    assert module.scale.__defaults__[1] is module.SENTINEL  # unchanged: the same object
    swapper.unpatch(target, 1)
    after = (target.__code__, target.__defaults__, target.__kwdefaults__, target.__annotations__)
    assert all(old is new for old, new in zip(before, after, strict=True))
    assert str(inspect.signature(module.scale)) == "(x, factor=2, bucket=[], *, offset=0)"


def test_changed_annotations_are_evaluated_and_restored(modules: ModuleFactory) -> None:
    module = modules.load("sigs", SIGNATURES_MODULE)
    target = loaded_function("sigs.typed")
    annotations = target.__annotations__
    swapper = CodeSwapper()
    swapper.patch(
        target,
        edit_layer(
            "sigs.typed",
            (
                "def typed(x: int, y: int = 1) -> int:",
                "replacement",
                "def typed(x: int, y: float = 2.5) -> float:",
            ),
        ),
    )
    assert module.typed(1) == 3.5
    assert str(inspect.signature(module.typed)) == "(x: int, y: float = 2.5) -> float"
    swapper.unpatch(target, 1)
    assert target.__annotations__ is annotations


def test_a_default_that_needs_the_class_body_is_refused_at_apply_and_statically(
    modules: ModuleFactory,
) -> None:
    path = modules.write("sigs", SIGNATURES_MODULE)
    modules.load("sigs", SIGNATURES_MODULE)
    target = loaded_function("sigs.Holder.step")
    original = target.__code__
    edit = ("def step(self, x, by=1):", "replacement", "def step(self, x, by=STEP):")
    with pytest.raises(PatchApplicationError) as caught:
        CodeSwapper().patch(target, edit_layer("sigs.Holder.step", edit))
    assert str(caught.value) == (
        f"/reg/1.yaml:1: PR 1: sigs.Holder.step ({path}:26): the edited default of by `STEP` "
        "cannot be evaluated in the globals of module sigs (NameError: name 'STEP' is not "
        "defined); a code swap evaluates new defaults and annotations there, not in a class "
        "body or an enclosing function"
    )
    assert target.__code__ is original
    static = find_in_source_tree("sigs.Holder.step", source_root=modules.root)
    with pytest.raises(PatchApplicationError) as caught:
        build_replacement(static, [edit_layer("sigs.Holder.step", edit)])
    assert str(caught.value) == (
        f"/reg/1.yaml:1: PR 1: sigs.Holder.step ({path}:26): the edited default of by `STEP` "
        "reads STEP, which the module does not bind at its top level; a code swap evaluates "
        "new defaults and annotations in the module's globals"
    )


def test_a_module_level_default_passes_the_static_check(modules: ModuleFactory) -> None:
    modules.write("sigs", SIGNATURES_MODULE)
    static = find_in_source_tree("sigs.Holder.step", source_root=modules.root)
    edit = ("def step(self, x, by=1):", "replacement", "def step(self, x, by=LIMIT * 2):")
    replacement = build_replacement(static, [edit_layer("sigs.Holder.step", edit)])
    assert replacement.values is not None and replacement.code.co_argcount == 3


def test_a_decorator_edit_is_refused_naming_the_recipe_the_target_and_why(
    modules: ModuleFactory,
) -> None:
    path = modules.write("sigs", SIGNATURES_MODULE)
    modules.load("sigs", SIGNATURES_MODULE)
    target = loaded_function("sigs.tagged")
    original = target.__code__
    swapper = CodeSwapper()
    swapper.patch(
        target, edit_layer("sigs.tagged", ("return x + 1", "replacement", "return x + 2"))
    )
    removal = edit_layer("sigs.tagged", ("@tag", "replacement", ""), pr=2)
    expected = (
        f"/reg/2.yaml:1: PR 2: sigs.tagged ({path}:14): the edit changes the decorator lines "
        "of tagged(); decorators and anything outside the def's signature and body cannot "
        "take effect through a code swap"
    )
    with pytest.raises(PatchApplicationError) as caught:
        swapper.patch(target, removal)
    assert str(caught.value) == expected
    static = find_in_source_tree("sigs.tagged", source_root=modules.root)
    with pytest.raises(PatchApplicationError) as caught:
        build_replacement(static, [removal])
    assert str(caught.value) == expected
    swapper.unpatch(target, 1)
    assert target.__code__ is original


def test_restoring_the_layer_that_changed_defaults_puts_back_the_original_objects(
    modules: ModuleFactory,
) -> None:
    module = modules.load("sigs", SIGNATURES_MODULE)
    target = loaded_function("sigs.scale")
    defaults, kwdefaults = target.__defaults__, target.__kwdefaults__
    swapper = CodeSwapper()
    swapper.patch(
        target,
        edit_layer(
            "sigs.scale",
            (SCALE_HEADER, "replacement", "def scale(x, factor=5, bucket=SENTINEL, *, offset=1):"),
            pr=1,
        ),
    )
    swapper.patch(
        target,
        edit_layer("sigs.scale", ("return x * factor + offset", "prepend", "x = x + 1"), pr=2),
    )
    assert module.scale(1) == 11
    swapper.unpatch(target, 1)
    assert module.scale(1) == 4
    assert target.__defaults__ is defaults and target.__kwdefaults__ is kwdefaults


def test_body_only_edits_leave_the_def_values_untouched(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    modules.load("sigs", SIGNATURES_MODULE)
    target = loaded_function("sigs.scale")
    defaults = target.__defaults__
    replacement = build_replacement(
        find_in_source_tree("sigs.scale", source_root=modules.root),
        [edit_layer("sigs.scale", ("return x * factor + offset", "replacement", "return 0"))],
    )
    assert replacement.values is None
    CodeSwapper().patch(
        target, edit_layer("sigs.scale", ("return x * factor + offset", "replacement", "return 0"))
    )
    assert target.__defaults__ is defaults

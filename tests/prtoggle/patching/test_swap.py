"""Tests for prtoggle.patching.swap: every target kind, exact restore, layering of fixes."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace

import pytest
from revert_fixtures import (  # noqa: F401
    ModuleFactory,
    edit_layer,
    loaded_function,
    make_patch,
    modules_fixture,
)

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.swap import CodeSwapper, EditLayer

KINDS_MODULE = """\
import functools


class Base:
    def greet(self):
        return "base"


class Widget(Base):
    def __init__(self):
        self.__secret = 5

    def greet(self):
        text = super().greet()
        return text + "!"

    def secret(self):
        return self.__secret

    @property
    def size(self):
        return 1

    @size.setter
    def size(self, value):
        raise AttributeError("read only")

    @staticmethod
    def double(a):
        return a * 2

    @classmethod
    def name(cls):
        return cls.__name__


def make_class(k):
    class Local(Base):
        def greet(self):
            return super().greet() + k
    return Local


def make_adder(k):
    def add(a):
        return a + k
    return add


def logged(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)
    return wrapper


@logged
def wrapped(a):
    return a + 1


async def fetch(a):
    return a + 1


def scaled(a, factor=3, *, offset=0):
    return a * factor + offset
"""


@pytest.mark.parametrize(
    ("target", "edit", "call", "expected"),
    [
        (
            "kinds.Widget.greet",
            ('return text + "!"', "replacement", 'return text + "?"'),
            lambda m: m.Widget().greet(),
            ("base!", "base?"),
        ),
        (
            "kinds.Widget.secret",
            ("return self.__secret", "replacement", "return self.__secret * 10"),
            lambda m: m.Widget().secret(),
            (5, 50),
        ),
        (
            "kinds.Widget.size",
            ("return 1", "replacement", "return 2"),
            lambda m: m.Widget().size,
            (1, 2),
        ),
        (
            "kinds.Widget.double",
            ("return a * 2", "replacement", "return a * 3"),
            lambda m: m.Widget.double(2),
            (4, 6),
        ),
        (
            "kinds.Widget.name",
            ("return cls.__name__", "replacement", 'return "renamed"'),
            lambda m: m.Widget.name(),
            ("Widget", "renamed"),
        ),
        (
            "kinds.wrapped",
            ("return a + 1", "replacement", "return a + 100"),
            lambda m: m.wrapped(1),
            (2, 101),
        ),
        (
            "kinds.fetch",
            ("return a + 1", "prepend", "a = -a"),
            lambda m: asyncio.run(m.fetch(1)),
            (2, 0),
        ),
    ],
)
def test_every_target_kind_is_patched_and_restored_to_the_identical_code(
    modules: ModuleFactory,
    target: str,
    edit: tuple[str, str, str],
    call: object,
    expected: tuple[object, object],
) -> None:
    fixed, reverted = expected
    module = modules.load("kinds", KINDS_MODULE)
    target_function = loaded_function(target)
    original = target_function.__code__
    swapper = CodeSwapper()
    swapper.patch(target_function, edit_layer(target, edit))
    assert call(module) == reverted  # type: ignore[operator]
    swapper.unpatch(target_function, 1)
    assert target_function.__code__ is original
    assert call(module) == fixed  # type: ignore[operator]


def test_closure_function_keeps_its_cells(modules: ModuleFactory) -> None:
    module = modules.load("kinds", KINDS_MODULE)
    add = module.make_adder(10)
    CodeSwapper().patch(
        add, edit_layer("kinds.make_adder.add", ("return a + k", "replacement", "return a + 2 * k"))
    )
    assert add(1) == 21
    assert add.__code__.co_freevars == ("k",)


def test_method_with_both_super_and_a_closure_keeps_both_cells(modules: ModuleFactory) -> None:
    module = modules.load("kinds", KINDS_MODULE)
    local = module.make_class("?")
    CodeSwapper().patch(
        local.greet,
        edit_layer(
            "kinds.make_class.Local.greet",
            ("return super().greet() + k", "replacement", "return super().greet() + k + k"),
        ),
    )
    assert local().greet() == "base??"
    assert local.greet.__code__.co_freevars == ("__class__", "k")


def test_default_edits_take_effect_and_restore_puts_back_the_original_objects(
    modules: ModuleFactory,
) -> None:
    module = modules.load("kinds", KINDS_MODULE)
    target = loaded_function("kinds.scaled")
    originals = (target.__code__, target.__defaults__, target.__kwdefaults__)
    swapper = CodeSwapper()
    swapper.patch(
        target,
        edit_layer(
            "kinds.scaled",
            (
                "def scaled(a, factor=3, *, offset=0):",
                "replacement",
                "def scaled(a, factor=30, *, offset=7):",
            ),
        ),
    )
    assert module.scaled(1) == 37
    assert module.scaled.__defaults__ == (30,)
    assert module.scaled.__kwdefaults__ == {"offset": 7}
    swapper.unpatch(target, 1)
    assert module.scaled(1) == 3
    assert target.__code__ is originals[0]
    assert target.__defaults__ is originals[1]
    assert target.__kwdefaults__ is originals[2]


SIGNATURE_MODULE = """\
def short(a, factor=3): return a * factor


def spread(
    a,
    factor=3
):
    return a * factor
"""


@pytest.mark.parametrize(
    ("target", "edit"),
    [
        (
            "signatures.short",
            (
                "def short(a, factor=3): return a * factor",
                "replacement",
                "def short(a, factor=30): return a * factor",
            ),
        ),
        ("signatures.spread", ("factor=3", "replacement", "factor=30")),
    ],
)
def test_a_default_edited_on_a_one_line_def_or_a_later_signature_line_takes_effect(
    modules: ModuleFactory, target: str, edit: tuple[str, str, str]
) -> None:
    module = modules.load("signatures", SIGNATURE_MODULE)
    function = loaded_function(target)
    CodeSwapper().patch(function, edit_layer(target, edit))
    assert (function(1), function.__defaults__) == (30, (30,))
    assert module.short(2, 1) == 2


def test_two_fixes_on_one_function_compose_and_restore_in_any_order(
    modules: ModuleFactory,
) -> None:
    module = modules.load("kinds", KINDS_MODULE)
    target = loaded_function("kinds.scaled")
    original = target.__code__
    swapper = CodeSwapper()
    swapper.patch(
        target,
        edit_layer("kinds.scaled", ("return a * factor + offset", "prepend", "a = a + 1"), pr=1),
    )
    swapper.patch(
        target,
        edit_layer("kinds.scaled", ("return a * factor + offset", "append", "return 0"), pr=2),
    )
    assert module.scaled(1) == 6
    swapper.unpatch(target, 1)
    assert module.scaled(1) == 3
    swapper.unpatch(target, 2)
    assert target.__code__ is original


def test_restoring_a_fix_another_fix_builds_on_is_refused(modules: ModuleFactory) -> None:
    modules.load("kinds", KINDS_MODULE)
    target = loaded_function("kinds.scaled")
    swapper = CodeSwapper()
    swapper.patch(
        target,
        edit_layer(
            "kinds.scaled", ("return a * factor + offset", "replacement", "return a * factor"), pr=1
        ),
    )
    swapper.patch(
        target, edit_layer("kinds.scaled", ("return a * factor", "replacement", "return a"), pr=2)
    )
    with pytest.raises(PatchApplicationError) as caught:
        swapper.unpatch(target, 1)
    assert str(caught.value).startswith(
        "cannot restore PR 1 on scaled while PR 2 stay in force: their edits need PR 1's "
        "edits (kinds.scaled: edit 1 of 1 (/reg/2.yaml:1) matched 0 times in "
    )
    assert str(caught.value).endswith("; restore them first")
    assert sys.modules["kinds"].scaled(5) == 5


def test_a_failing_edit_leaves_the_function_untouched(modules: ModuleFactory) -> None:
    modules.load("kinds", KINDS_MODULE)
    target = loaded_function("kinds.scaled")
    original = target.__code__
    swapper = CodeSwapper()
    with pytest.raises(PatchApplicationError):
        swapper.patch(target, edit_layer("kinds.scaled", ("no such line", "replacement", "")))
    assert target.__code__ is original
    assert not swapper.is_patched(target)


def test_the_same_pr_cannot_edit_a_function_twice(modules: ModuleFactory) -> None:
    modules.load("kinds", KINDS_MODULE)
    target = loaded_function("kinds.scaled")
    swapper = CodeSwapper()
    swapper.patch(
        target, edit_layer("kinds.scaled", ("return a * factor + offset", "prepend", "a = 0"))
    )
    with pytest.raises(PatchApplicationError) as caught:
        swapper.patch(target, edit_layer("kinds.scaled", ("a = 0", "replacement", "a = 1")))
    assert str(caught.value) == "kinds.scaled: PR 1 already edits this function"


def test_a_patch_preamble_runs_at_the_top_of_the_body_after_the_docstring(
    modules: ModuleFactory,
) -> None:
    module = modules.load(
        "documented",
        'def halve(x):\n    """Half of x."""\n    return x / 2\n',
    )
    target = loaded_function("documented.halve")
    original = target.__code__
    patch = replace(
        make_patch("documented.halve", ("return x / 2", "replacement", "return x // 2")),
        preamble="x = x + 1\n",
    )
    swapper = CodeSwapper()
    swapper.patch(target, EditLayer(pr=5, patch=patch, yaml_path="/reg/5.yaml"))
    assert module.halve(5) == 3  # (5 + 1) // 2; without the preamble 5 // 2 == 2
    assert module.halve.__doc__ == "Half of x."
    swapper.unpatch(target, 5)
    assert target.__code__ is original and module.halve(4) == 2.0


IMPORTS_MODULE = """\
import json
from collections import OrderedDict

if False:
    import textwrap


def encode(value):
    table = OrderedDict(value=value)
    text = textwrap.indent(json.dumps(table), "")
    return json.dumps(text)
"""
PRE_FIX_ENCODE = """\
def encode(value):
    table = OrderedDict.fromkeys([value])
    text = textwrap.indent(json.dumps(table), "")
    return json.dumps(text, sort_keys=True)
"""


def test_a_swapped_function_is_the_bytecode_its_module_compiles_from_the_pre_fix_text(
    modules: ModuleFactory,
) -> None:
    # Python 3.11 compiles `name.attr(...)` on a name imported in the module scope (run or
    # not) as LOAD_ATTR, on any other name as LOAD_METHOD: compiled apart from its module,
    # the reverted code must still know which names the module imports.
    modules.load("imports_demo", IMPORTS_MODULE)
    encode = loaded_function("imports_demo.encode")
    pre_fix_module = IMPORTS_MODULE.replace(
        IMPORTS_MODULE[IMPORTS_MODULE.index("def encode") :], PRE_FIX_ENCODE
    )
    namespace: dict[str, object] = {}
    exec(compile(pre_fix_module, "pre.py", "exec"), namespace)
    expected = namespace["encode"].__code__  # type: ignore[attr-defined]
    CodeSwapper().patch(
        encode,
        edit_layer(
            "imports_demo.encode",
            ("table = OrderedDict(value=value)", "replacement", PRE_FIX_ENCODE.splitlines()[1]),
            ("return json.dumps(text)", "replacement", PRE_FIX_ENCODE.splitlines()[3]),
        ),
    )
    assert encode.__code__.co_code == expected.co_code
    assert encode.__code__.co_names == expected.co_names

"""Tests for patching.names, define_code, global_reads: name changes applied, undone exactly."""

from __future__ import annotations

import textwrap
import types

import pytest
from revert_fixtures import ModuleFactory, modules_fixture  # noqa: F401

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.define_code import define_bindings, define_problem
from prtoggle.patching.global_reads import global_reads, missing_globals
from prtoggle.patching.name_scopes import NameScope, resolve_scope
from prtoggle.patching.names import AppliedNames, apply_names
from prtoggle.patching.targets import PendingTarget

CORE = """\
import math

LIMIT = 8192
TABLE = {"a": 1}


def new_helper(x):
    return x * 2


def compute(x):
    return new_helper(x) + LIMIT


class Base:
    def forward(self):
        return "base"


class Child(Base):
    def forward(self):
        return "child:" + super().forward()

    def extra(self):
        return 1
"""
USER = """\
from app.core import LIMIT, TABLE
from app.core import new_helper as nh

DEBUG = 8192
"""


App = tuple[types.ModuleType, types.ModuleType]


@pytest.fixture(name="app")
def app_fixture(modules: ModuleFactory) -> App:
    core = modules.load("app.core", CORE)
    user = modules.load("app.user", USER)
    return core, user


def scope_of(name: str) -> NameScope:
    found = resolve_scope(name)
    assert isinstance(found, NameScope)
    return found


def apply(scope: str, *, define: str = "", remove: tuple[str, ...] = ()) -> AppliedNames:
    return apply_names(
        scope_of(scope), define=define, remove=remove, label="r.yaml:3: PR 7",
        filename="r.yaml", first_line=10,
    )  # fmt: skip


def test_module_define_and_remove_land_and_restore_the_identical_objects(app: App) -> None:
    core, _ = app
    before = dict(vars(core))
    applied = apply(
        "app.core",
        define="LIMIT = 4096\ndef _old_helper(x):\n    return x + 1\n",
        remove=("new_helper",),
    )
    assert core.LIMIT == 4096
    assert "new_helper" not in vars(core)
    assert core._old_helper(1) == 2
    assert core._old_helper.__globals__ is vars(core)
    assert core._old_helper.__code__.co_filename == "r.yaml"
    assert core._old_helper.__code__.co_firstlineno == 11
    applied.restore()
    assert set(vars(core)) == set(before)
    assert all(vars(core)[name] is value for name, value in before.items())


def test_names_other_modules_import_from_the_scope_follow_any_alias_equal_values_do_not(
    app: App,
) -> None:
    core, user = app
    helper, table, debug = core.new_helper, core.TABLE, user.DEBUG
    applied = apply("app.core", define="LIMIT = 4096\nTABLE = {}\n", remove=("new_helper",))
    assert user.LIMIT == 4096  # an int copy under the same name
    assert user.DEBUG == 8192  # an equal int under another name is not a copy
    assert user.TABLE is core.TABLE == {}
    assert "nh" not in vars(user)  # a function copy under any name
    applied.restore()
    assert user.nh is helper and user.TABLE is table and user.DEBUG is debug
    assert user.LIMIT == 8192


def test_an_equal_atom_not_imported_from_the_scope_and_an_import_of_the_scope_stay(
    modules: ModuleFactory,
) -> None:
    # `TYPE_CHECKING` (False, from typing) is in many modules; removing the scope's import of
    # it, or its own `LIMIT` changing, must not touch another module's equal value.
    core = modules.load("app.core", "from typing import TYPE_CHECKING\nLIMIT = 8192\n")
    other = modules.load("app.other", "from typing import TYPE_CHECKING\nLIMIT = 8192\n")
    user = modules.load("app.user", "from app.core import LIMIT\n")
    applied = apply("app.core", define="LIMIT = 4096\n", remove=("TYPE_CHECKING",))
    assert "TYPE_CHECKING" not in vars(core) and other.TYPE_CHECKING is False
    assert (core.LIMIT, user.LIMIT, other.LIMIT) == (4096, 4096, 8192)
    applied.restore()
    assert core.TYPE_CHECKING is False and user.LIMIT == 8192


def test_an_imported_function_rebound_in_the_scope_is_not_followed_to_its_own_module(
    app: App,
) -> None:
    core, _ = app
    original = core.math.sqrt
    core.sqrt = original  # `from math import sqrt` in app.core: math's own, not app.core's
    applied = apply("app.core", define="def sqrt(x):\n    return -1\n")
    assert core.sqrt(4) == -1 and core.math.sqrt is original
    applied.restore()
    assert core.sqrt is original


def test_class_define_uses_the_real_class_for_zero_argument_super(app: App) -> None:
    core, _ = app
    forward, extra = vars(core.Child)["forward"], vars(core.Child)["extra"]
    applied = apply(
        "app.core.Child",
        define="@staticmethod\ndef tag():\n    return 't'\ndef extra(self):\n"
        "    return super().forward() + '!'\n",
        remove=("forward",),
    )
    assert core.Child().forward() == "base"  # the base method serves again
    assert core.Child().extra() == "base!"
    assert core.Child.tag() == "t"
    assert core.Child.extra.__qualname__ == "Child.extra"
    assert core.Child.extra.__module__ == "app.core"
    applied.restore()
    assert vars(core.Child)["forward"] is forward and vars(core.Child)["extra"] is extra
    assert "tag" not in vars(core.Child)


def test_defined_functions_compile_as_their_module_compiles_them(app: App) -> None:
    # `math.floor(x)` on a name the module imports compiles to other bytecode (CPython
    # 3.11) than on any other name: a define must know the module's imports.
    core, _ = app
    text = "def _floor(x):\n    return math.floor(x)\n"
    namespace: dict[str, object] = {}
    exec(compile(f"import math\n{text}", "pre.py", "exec"), namespace)
    expected = namespace["_floor"].__code__  # type: ignore[attr-defined]
    applied = apply("app.core", define=text)
    assert core._floor.__code__.co_code == expected.co_code
    applied.restore()
    method = "def _floor(self, x):\n    return math.floor(x)\n"
    exec(
        compile(f"import math\nclass C:\n{textwrap.indent(method, '    ')}", "", "exec"), namespace
    )
    applied = apply("app.core.Child", define=method)
    assert core.Child._floor.__code__.co_code == namespace["C"]._floor.__code__.co_code  # type: ignore[attr-defined]
    applied.restore()


def test_a_docstring_defined_back_is_the_module_s_and_the_class_s_doc_until_restored(
    app: App,
) -> None:
    core, _ = app
    module_doc, class_doc = core.__doc__, vars(core.Child)["__doc__"]
    applied = [
        apply("app.core", define="__doc__ = 'before the fix'\n"),
        apply("app.core.Child", define="__doc__ = 'a child, before'\n"),
    ]
    assert (core.__doc__, core.Child.__doc__) == ("before the fix", "a child, before")
    for change in reversed(applied):
        change.restore()
    assert core.__doc__ is module_doc and vars(core.Child)["__doc__"] is class_doc


def test_removing_a_name_that_is_not_there_refuses_and_changes_nothing(app: App) -> None:
    core, _ = app
    with pytest.raises(PatchApplicationError) as caught:
        apply("app.core", define="LIMIT = 1\n", remove=("gone",))
    assert str(caught.value) == (
        "r.yaml:3: PR 7: remove: `gone` is not bound in module app.core (the fix's code is "
        "not what the recipe expects: the recipe is stale)"
    )
    assert core.LIMIT == 8192


def test_a_define_failing_halfway_is_undone(app: App) -> None:
    core, user = app
    helper = core.new_helper
    with pytest.raises(PatchApplicationError) as caught:
        apply("app.core", define="LIMIT = 1\nimport no_such_module_here\n")
    assert "ModuleNotFoundError: No module named 'no_such_module_here'" in str(caught.value)
    assert core.LIMIT == 8192 and user.LIMIT == 8192 and core.new_helper is helper


def test_a_copy_that_cannot_be_updated_refuses_naming_it(app: App, modules: ModuleFactory) -> None:
    # A module that replaces itself in sys.modules with a class (a read-only namespace).
    core, _ = app
    modules.load(
        "odd_holder",
        "import sys\nfrom app.core import new_helper as helper\n"
        "sys.modules[__name__] = type('Holder', (), {'helper': helper, '__file__': __file__})\n",
    )
    with pytest.raises(PatchApplicationError) as caught:
        apply("app.core", remove=("new_helper",))
    assert str(caught.value) == (
        "r.yaml:3: PR 7: `new_helper` of module app.core is also held as odd_holder.helper, "
        "whose namespace (a mappingproxy) cannot be updated; a revert there would be "
        "half-visible"
    )
    assert "new_helper" in vars(core)


def test_two_changes_of_one_name_cannot_be_in_force_at_once(app: App) -> None:
    core, _ = app
    first = apply("app.core", define="LIMIT = 1\n")
    with pytest.raises(PatchApplicationError) as caught:
        apply_names(
            scope_of("app.core"), define="LIMIT = 2\n", remove=(), label="s.yaml:1: PR 8",
            filename="s.yaml", first_line=1,
        )  # fmt: skip
    assert str(caught.value) == (
        "s.yaml:1: PR 8: `LIMIT` of module app.core is already changed by r.yaml:3: PR 7; "
        "two name changes of one name cannot be in force at once: restore that one first"
    )
    first.restore()
    assert core.LIMIT == 8192


def test_scopes_not_imported_yet_are_pending(modules: ModuleFactory) -> None:
    modules.write("lazy.inner", "X = 1\nclass K:\n    pass\n")
    assert resolve_scope("lazy.inner") == PendingTarget(target="lazy.inner", module="lazy")
    __import__("lazy")
    assert resolve_scope("lazy.inner.K") == PendingTarget(
        target="lazy.inner.K", module="lazy.inner"
    )


def test_define_allows_only_binding_statements() -> None:
    assert define_problem("import os\nfrom a import b as c\nX: int = 1\nY, Z = 1, 2\n") is None
    problem = define_problem("X = 1\nprint(X)\n")
    assert problem is not None and problem.line == 2
    assert problem.message.startswith("a Expr statement is not allowed; expected one of: import")
    star = define_problem("from os import *\n")
    assert star is not None and "import *" in star.message
    walrus = define_problem("X = (y := 2)\n")
    assert walrus is not None and walrus.message.startswith("`:=` would bind")
    assert define_problem("def f():\n    return (y := 2)\n") is None
    assert define_bindings("import a.b\nfrom c import d as e\nX = Y = 1\n(P, Q) = 1, 2\n") == (
        "a",
        "e",
        "X",
        "Y",
        "P",
        "Q",
    )


def test_global_reads_follow_nested_code_and_skip_names_the_code_binds(
    modules: ModuleFactory,
) -> None:
    module = modules.load(
        "reads",
        "import os\n_cache = None\n"
        "def f():\n    global _made\n    _made = 1\n"
        "    g = lambda: helper_a\n    return [helper_b for _ in os.sep], len, g\n",
    )
    assert global_reads(module.f.__code__) == frozenset({"helper_a", "helper_b", "os", "len"})
    assert missing_globals(module.f) == ("helper_a", "helper_b")


def test_a_removed_annotated_name_takes_its_annotation_and_restore_puts_it_back_in_place(
    modules: ModuleFactory,
) -> None:
    text = "A: int = 1\nHOOK: object = None\nZ: str = ''\n\n\nclass Box:\n    size: int = 1\n"
    core = modules.load("annotated.core", text)
    annotations, box = core.__annotations__, core.Box.__annotations__
    module_change = apply("annotated.core", remove=("HOOK",))
    class_change = apply("annotated.core.Box", remove=("size",))
    assert (list(core.__annotations__), list(core.Box.__annotations__)) == (["A", "Z"], [])
    class_change.restore()
    module_change.restore()
    assert core.__annotations__ is annotations and core.Box.__annotations__ is box
    assert list(annotations.items()) == [("A", int), ("HOOK", object), ("Z", str)]
    assert list(box.items()) == [("size", int)]

"""Tests for patching.copies: a copy is a name bound by importing the scope's name, never a
name that happens to hold the same object (issue 32.1). Real modules in a temporary tree."""

from __future__ import annotations

import logging
import sys
import types

import pytest
from revert_fixtures import ModuleFactory, modules_fixture  # noqa: F401

from prtoggle.patching.copies import find_copies, one_scan
from prtoggle.patching.name_scopes import NameScope, resolve_scope
from prtoggle.patching.names import AppliedNames, apply_names


def apply(scope: str, *, define: str = "", remove: tuple[str, ...] = ()) -> AppliedNames:
    found = resolve_scope(scope)
    assert isinstance(found, NameScope)
    return apply_names(
        found, define=define, remove=remove, label="r.yaml:3: PR 7", filename="r.yaml",
        first_line=10,
    )  # fmt: skip


def test_a_recipe_rebinding_a_torch_dtype_never_changes_torch(modules: ModuleFactory) -> None:
    torch = pytest.importorskip("torch")
    bfloat16 = torch.bfloat16
    core = modules.load("app.core", "import torch\n\nDTYPE = torch.bfloat16\n")
    user = modules.load("app.user", "from app.core import DTYPE\n")
    own = modules.load("app.own", "import torch\n\nDTYPE = torch.bfloat16\n")
    applied = apply("app.core", define="DTYPE = torch.float16\n")
    assert torch.bfloat16 is bfloat16 and torch.bfloat16 is not torch.float16
    assert core.DTYPE is user.DTYPE is torch.float16 and own.DTYPE is bfloat16
    applied.restore()
    assert core.DTYPE is user.DTYPE is bfloat16


def test_removing_an_alias_of_a_shared_sentinel_leaves_its_owner_module_alone(
    modules: ModuleFactory,
) -> None:
    owner = modules.load("app.sentinels", "MISSING = object()\n")
    missing = owner.MISSING
    core = modules.load("app.core", "from app import sentinels\n\n_UNSET = sentinels.MISSING\n")
    user = modules.load("app.user", "from app.core import _UNSET\n")
    applied = apply("app.core", remove=("_UNSET",))
    assert owner.MISSING is missing
    assert "_UNSET" not in vars(core) and "_UNSET" not in vars(user)
    applied.restore()
    assert core._UNSET is user._UNSET is missing


def test_an_equal_empty_tuple_of_an_unrelated_module_is_not_a_copy(
    modules: ModuleFactory,
) -> None:
    core = modules.load("app.core", "EXTRA = ()\n")
    other = modules.load("app.other", "EXTRA = ()\nALIASED = ()\n")
    user = modules.load("app.user", "from app.core import EXTRA\n")
    applied = apply("app.core", define="EXTRA = ('old',)\n")
    assert (core.EXTRA, user.EXTRA, other.EXTRA, other.ALIASED) == (("old",), ("old",), (), ())
    applied.restore()
    assert core.EXTRA == user.EXTRA == ()


def test_imports_under_try_if_with_relative_aliased_and_re_exported_are_copies(
    modules: ModuleFactory,
) -> None:
    core = modules.load("app.core", "TABLE = {'a': 1}\n\n\ndef helper():\n    return 1\n")
    nested = modules.load(
        "app.nested",
        """\
        try:
            from app.core import helper as _h
        except ImportError:
            _h = None
        if True:
            from .core import TABLE as T
        """,
    )
    middle = modules.load("app.middle", "from .core import TABLE\n")
    outer = modules.load("elsewhere", "from app.middle import TABLE as MIDDLE_TABLE\n")
    applied = apply("app.core", define="TABLE = {}\n", remove=("helper",))
    assert nested.T is middle.TABLE is outer.MIDDLE_TABLE is core.TABLE == {}
    assert "_h" not in vars(nested)
    applied.restore()
    assert nested.T == {"a": 1} and nested._h is core.helper and outer.MIDDLE_TABLE is core.TABLE


def test_a_star_import_copies_what_it_exports_only(modules: ModuleFactory) -> None:
    core = modules.load(
        "app.core", "__all__ = ['LIMITS']\nLIMITS = [1]\nOTHER = [2]\n_PRIVATE = [3]\n"
    )
    star = modules.load("app.star", "from app.core import *\nfrom app.core import OTHER\n")
    public = modules.load("app.public", "from app.core import LIMITS as OTHER_NAME\n")
    applied = apply("app.core", define="LIMITS = []\nOTHER = []\n_PRIVATE = []\n")
    assert star.LIMITS is core.LIMITS and star.OTHER is core.OTHER and public.OTHER_NAME == []
    applied.restore()
    assert star.LIMITS == [1] and star.OTHER == [2]


def test_a_name_rebound_after_its_import_is_the_importer_s_own(modules: ModuleFactory) -> None:
    core = modules.load("app.core", "TABLE = {'a': 1}\n")
    user = modules.load("app.user", "from app.core import TABLE\nKEPT = TABLE\nTABLE = {}\n")
    table = core.TABLE
    applied = apply("app.core", define="TABLE = {'b': 2}\n")
    assert user.TABLE == {} and user.KEPT is table  # KEPT: an assignment, not an import
    applied.restore()


def test_a_holder_whose_source_cannot_be_read_is_said_and_left(
    modules: ModuleFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    core = modules.load("app.core", "TABLE = {'a': 1}\n")
    table = core.TABLE
    made = types.ModuleType("made_in_memory")
    made.HELD = table  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "made_in_memory", made)
    with caplog.at_level(logging.WARNING, logger="prtoggle"):
        applied = apply("app.core", define="TABLE = {}\n")
    assert made.HELD is table  # type: ignore[attr-defined]
    assert caplog.messages == [
        "r.yaml:3: PR 7: `TABLE` of module app.core is also held as made_in_memory.HELD, "
        "whose source cannot be read, so whether it is a copy (an import of that name) is "
        "unknown: it keeps the post-fix object"
    ]
    applied.restore()


def test_an_unreadable_holder_of_a_third_party_object_is_not_said(
    modules: ModuleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `import math; TAU = math.tau`-like: math (readable or not, another package) holds
    # the value for itself; a module made in memory that holds it got it there.
    modules.load("app.owner", "SHARED = object()\n")
    core = modules.load("app.core", "from app import owner\nSHARED = owner.SHARED\n")
    made = types.ModuleType("made_in_memory")
    made.SHARED = core.SHARED  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "made_in_memory", made)
    found = find_copies(core, {"SHARED": core.SHARED})
    assert (found.copies, found.unreadable) == ((), ())


def test_an_unreadable_holder_of_a_common_value_is_neither_a_copy_nor_said(
    modules: ModuleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = modules.load("app.core", "MODE = None\nEXTRA = ()\n")
    made = types.ModuleType("made_in_memory")
    made.MODE, made.EXTRA = None, ()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "made_in_memory", made)
    found = find_copies(core, {"MODE": None, "EXTRA": ()})
    assert (found.copies, found.unreadable) == ((), ())


def test_an_import_inside_a_function_is_not_a_copy_of_a_module_level_name(
    modules: ModuleFactory,
) -> None:
    core = modules.load("app.core", "TABLE = {'a': 1}\n")
    table = core.TABLE
    user = modules.load(
        "app.user",
        """\
        import app.core
        from app.core import (  # a comment
            TABLE as SAME,
        )
        TABLE = app.core.TABLE


        def lazy():
            from app.core import TABLE

            return TABLE
        """,
    )
    applied = apply("app.core", define="TABLE = {}\n")
    assert user.TABLE is table and user.SAME is core.TABLE == {}
    applied.restore()


def test_two_scope_names_of_one_object_each_follow_their_own_imports(
    modules: ModuleFactory,
) -> None:
    core = modules.load("app.core", "FIRST = SECOND = {'a': 1}\n")
    user = modules.load("app.user", "from app.core import FIRST\nfrom app.core import SECOND\n")
    applied = apply("app.core", define="FIRST = {}\nSECOND = {'b': 2}\n")
    assert user.FIRST is core.FIRST == {} and user.SECOND is core.SECOND == {"b": 2}
    applied.restore()
    assert user.FIRST is user.SECOND is core.FIRST


def test_one_scan_finds_the_copies_of_each_scope_as_separate_calls_do(
    modules: ModuleFactory,
) -> None:
    first = modules.load("app.first", "class A:\n    pass\n")
    second = modules.load("app.second", "class B:\n    pass\n")
    modules.load("app.user", "from app.first import A\nfrom app.second import B\n")
    apart = [find_copies(first, {"A": first.A}), find_copies(second, {"B": second.B})]
    with one_scan():
        together = [find_copies(first, {"A": first.A}), find_copies(second, {"B": second.B})]
    assert together == apart
    assert [[(h.module_name, h.attribute) for h in c.copies] for c in together] == [
        [("app.user", "A")],
        [("app.user", "B")],
    ]


def test_one_scan_sees_a_copy_bound_and_a_module_imported_after_its_first_look(
    modules: ModuleFactory,
) -> None:
    core = modules.load("app.core", "class A:\n    pass\n\n\nclass B:\n    pass\n")
    user = modules.load("app.user", "from app.core import A\n")
    with one_scan():
        assert [h.module_name for h in find_copies(core, {"A": core.A}).copies] == ["app.user"]
        assert find_copies(core, {"B": core.B}).copies == ()  # app.user gathered: no B
        user.B = core.B  # the namespace grew: gathered again
        (modules.root / "app" / "user.py").write_text("from app.core import A, B\n")
        modules.load("app.late", "from app.core import B\n")
        found = find_copies(core, {"B": core.B}).copies
    assert sorted(h.module_name for h in found) == ["app.late", "app.user"]

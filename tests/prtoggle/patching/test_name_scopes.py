"""Tests for where a names scope lives (prtoggle.patching.name_scopes)."""

from __future__ import annotations

import pytest
from revert_fixtures import ModuleFactory, clean_toggle_state, modules_fixture  # noqa: F401

from prtoggle.errors import TargetResolutionError
from prtoggle.patching.name_scopes import NameScope, resolve_scope
from prtoggle.patching.targets import PendingTarget

SOURCE = "X = 1\n\n\nclass K:\n    pass\n"


def test_a_module_and_a_class_at_its_top_level_are_scopes(modules: ModuleFactory) -> None:
    module = modules.load("scopes.mod", SOURCE)
    assert resolve_scope("scopes.mod") == NameScope(name="scopes.mod", module=module)
    found = resolve_scope("scopes.mod.K")
    assert found == NameScope(name="scopes.mod.K", module=module, cls=module.K)
    assert isinstance(found, NameScope) and (found.holder, found.kind) == (module.K, "class")


def test_a_scope_not_imported_yet_waits_for_its_first_missing_module(
    modules: ModuleFactory,
) -> None:
    modules.write("scopes.late", SOURCE)
    assert resolve_scope("scopes.late.K") == PendingTarget(target="scopes.late.K", module="scopes")


@pytest.mark.parametrize(
    ("scope", "message"),
    [
        ("scopes.mod.X", "scopes.mod.X: scopes.mod.X is a int, not a class; a scope is a module "
         "or a class at its module's top level"),
        ("scopes.mod.Gone", "scopes.mod.Gone: module scopes.mod has no class 'Gone'"),
        ("nowhere_at_all.K", "nowhere_at_all.K: no module named 'nowhere_at_all' is importable; "
         "expected a scope module or module.Class"),
    ],
)  # fmt: skip
def test_what_is_not_a_scope_is_an_error_naming_it(
    modules: ModuleFactory, scope: str, message: str
) -> None:
    modules.load("scopes.mod", SOURCE)
    with pytest.raises(TargetResolutionError) as caught:
        resolve_scope(scope)
    assert str(caught.value) == message

"""Tests for which class attributes a revert may set (prtoggle.patching.class_members)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pytest

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.class_members import refuse_unassignable
from prtoggle.patching.commit import ABSENT


@dataclass(frozen=True)
class Scope:
    name: str
    cls: type | None


class Mode(enum.Enum):
    FAST = 1

    def describe(self) -> str:
        return self.name


class Guarded(type):
    def __setattr__(cls, name: str, value: object) -> None:
        super().__setattr__(name, value)


class Plain:
    pass


def old_describe(self: Mode) -> str:
    return "old"


def test_plain_classes_modules_and_an_enums_methods_take_any_change() -> None:
    refuse_unassignable(Scope("m.Plain", Plain), {"x": 1, "y": ABSENT}, label="r.yaml:3: PR 1")
    refuse_unassignable(Scope("m", None), {"x": 1}, label="r.yaml:3: PR 1")
    changes = {"describe": old_describe, "_cache": {}, "describe2": ABSENT}
    refuse_unassignable(Scope("m.Mode", Mode), changes, label="r.yaml:3: PR 1")


@pytest.mark.parametrize("changes", [{"FAST": 2}, {"SLOW": 3}, {"FAST": ABSENT}])
def test_an_enum_member_is_refused_naming_the_recipe(changes: dict[str, object]) -> None:
    name = next(iter(changes))
    with pytest.raises(PatchApplicationError) as caught:
        refuse_unassignable(Scope("m.Mode", Mode), changes, label="r.yaml:3: PR 1")
    assert str(caught.value) == (
        f"r.yaml:3: PR 1: `{name}` of class m.Mode is an enum member (now or in the define); a "
        "revert cannot add, rebind or remove the members of enum Mode (its member table would "
        "not follow); list the change in not_reverted"
    )


def test_a_metaclass_with_its_own_attribute_assignment_is_refused() -> None:
    guarded = Guarded("Thing", (), {})
    with pytest.raises(PatchApplicationError) as caught:
        refuse_unassignable(Scope("m.Thing", guarded), {"x": 1}, label="r.yaml:3: PR 1")
    assert str(caught.value) == (
        f"r.yaml:3: PR 1: names of class m.Thing cannot be reverted: its metaclass "
        f"{__name__}.Guarded has its own attribute assignment, which a revert would bypass; "
        "list the change in not_reverted"
    )


def test_an_immutable_type_is_refused() -> None:
    with pytest.raises(PatchApplicationError) as caught:
        refuse_unassignable(Scope("builtins.int", int), {"x": 1}, label="r.yaml:3: PR 1")
    assert str(caught.value) == (
        "r.yaml:3: PR 1: names of class builtins.int cannot be reverted: builtins.int is an "
        "immutable type (defined in C); list the change in not_reverted"
    )

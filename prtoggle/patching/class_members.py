"""Class attributes a revert may set in one step; enum members, own-setattr metaclasses refused."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Protocol

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.commit import ABSENT


class Scope(Protocol):
    """A names scope (prtoggle.patching.names.NameScope): its dotted name and its class."""

    @property
    def name(self) -> str: ...

    @property
    def cls(self) -> type | None: ...


def refuse_unassignable(scope: Scope, values: Mapping[str, object], *, label: str) -> None:
    """Raise (PatchApplicationError starting with `label`) when a class scope cannot take
    `values` (name -> new value, or the ABSENT marker for a removal) as plain attributes.

    A revert sets class attributes with `type.__setattr__`, as one step with its other
    changes: a metaclass with its own `__setattr__` / `__delattr__` would be bypassed (or
    would run code mid-landing), so it is refused, except an Enum's for names that are not
    members (methods, descriptors, private names), where that is what Enum does itself.
    """
    cls = scope.cls
    if cls is None:
        return
    if cls.__flags__ & _IMMUTABLE_TYPE:
        raise PatchApplicationError(
            f"{label}: names of class {scope.name} cannot be reverted: "
            f"{cls.__module__}.{cls.__qualname__} is an immutable type (defined in C); list "
            "the change in not_reverted"
        )
    meta = type(cls)
    if meta.__setattr__ is type.__setattr__ and meta.__delattr__ is type.__delattr__:
        return
    if not issubclass(cls, enum.Enum):
        raise PatchApplicationError(
            f"{label}: names of class {scope.name} cannot be reverted: its metaclass "
            f"{meta.__module__}.{meta.__qualname__} has its own attribute assignment, which a "
            "revert would bypass; list the change in not_reverted"
        )
    members = vars(cls).get("_member_map_", {})
    for name, value in values.items():
        if name in members or _would_be_member(name, value):
            raise PatchApplicationError(
                f"{label}: `{name}` of class {scope.name} is an enum member (now or in the "
                f"define); a revert cannot add, rebind or remove the members of enum "
                f"{cls.__qualname__} (its member table would not follow); list the change in "
                "not_reverted"
            )


def _would_be_member(name: str, value: object) -> bool:
    """Whether Enum's class body would make `name = value` a member (not a method,
    descriptor or private name). A removal (no value) is never a new member."""
    if name.startswith("_") or value is ABSENT:
        return False
    return not hasattr(type(value), "__get__")


_IMMUTABLE_TYPE = 1 << 8
"""Py_TPFLAGS_IMMUTABLETYPE: a type whose attributes cannot be set (builtins, most C types)."""

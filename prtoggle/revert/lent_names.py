"""Names a fix added that its other changed modules import: lent to those modules only.

A fix that adds `helper` to module A and a line `from A import helper` to module B (both
changed by the fix) has a recipe removing `helper` from A and from B. Removed from A
first, B's post-fix import line (which runs until B's revert lands) would raise
ImportError, a failure the program never had. While such a revert is in force A gets a
module `__getattr__` (PEP 562) that gives the removed object to the fix's own modules
that remove it too (B), and to no one else: any other module's `from A import helper`
fails as before the fix. A's own `__getattr__`, if any, is asked otherwise, and put back
when the revert ends. Used under the revert lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType

from prtoggle.patching.import_hook import calling_module
from prtoggle.revert.fix_landing import ActiveRecipe

_ABSENT = object()
"""A module without a `__getattr__` of its own."""


@dataclass
class _Lender:
    """The `__getattr__` put on one module: its removed names, who may have them."""

    module: ModuleType
    previous: object
    names: dict[str, object] = field(default_factory=dict)
    borrowers: dict[str, frozenset[str]] = field(default_factory=dict)

    def __call__(self, name: str) -> object:
        if name in self.names and calling_module(skip=(__file__,)) in self.borrowers[name]:
            return self.names[name]
        if callable(self.previous):
            getter: Callable[[str], object] = self.previous
            return getter(name)
        raise AttributeError(f"module {self.module.__name__!r} has no attribute {name!r}")


_LENDERS: dict[int, list[_Lender]] = {}


def lend(pr: int, recipes: Sequence[ActiveRecipe]) -> None:
    """Lend each name `pr` removed from one module and removes from another of its modules
    (that module imported it) to that other module; the rest stays removed."""
    borrowers = _borrowers(recipes)
    for active in recipes:
        for index, applied in active.names_applied:
            scope, removed = applied.scope, active.recipe.names[index].remove
            if scope.cls is not None:
                continue
            for binding in applied.bindings:  # a removed name was bound: `previous` is it
                takers = borrowers.get(binding.name, set()) - {scope.module.__name__}
                if binding.holder is scope.module and takers and binding.name in removed:
                    _lender(pr, scope.module).names.setdefault(binding.name, binding.previous)
                    _lender(pr, scope.module).borrowers[binding.name] = frozenset(takers)


def end(pr: int) -> None:
    """Take back `pr`'s lenders: each module's own `__getattr__` (or none) again."""
    for lender in reversed(_LENDERS.pop(pr, [])):
        namespace = vars(lender.module)
        if namespace.get("__getattr__") is lender:
            if lender.previous is _ABSENT:
                del namespace["__getattr__"]
            else:
                namespace["__getattr__"] = lender.previous


def reset() -> None:
    """End every loan (tests; a process's last restore)."""
    for pr in list(_LENDERS):
        end(pr)


def _lender(pr: int, module: ModuleType) -> _Lender:
    for lender in _LENDERS.get(pr, []):
        if lender.module is module:
            return lender
    namespace = vars(module)
    lender = _Lender(module, namespace.get("__getattr__", _ABSENT))
    namespace["__getattr__"] = lender
    _LENDERS.setdefault(pr, []).append(lender)
    return lender


def _borrowers(recipes: Sequence[ActiveRecipe]) -> dict[str, set[str]]:
    """Name -> the modules whose `names` entry of these recipes removes it."""
    found: dict[str, set[str]] = {}
    for active in recipes:
        for change in active.recipe.names:
            for name in change.remove:
                found.setdefault(name, set()).add(change.scope)
    return found

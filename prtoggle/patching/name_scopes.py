"""Where a names scope lives: an imported module, or a class at its top level; never imports."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import ModuleType

from prtoggle.errors import TargetResolutionError
from prtoggle.patching.commit import ABSENT
from prtoggle.patching.targets import PendingTarget, module_exists


@dataclass(frozen=True)
class NameScope:
    """A resolved scope: its module, and its class when the scope is `module.Class`."""

    name: str
    module: ModuleType
    cls: type | None = None

    @property
    def holder(self) -> object:
        return self.module if self.cls is None else self.cls

    @property
    def kind(self) -> str:
        return "module" if self.cls is None else "class"


def resolve_scope(scope: str) -> NameScope | PendingTarget:
    """`scope` (a module, or `module.Class`) among imported modules; never imports.

    A module not imported yet gives a PendingTarget for it. A class scope names a class
    at its module's top level.
    """
    module = sys.modules.get(scope)
    if isinstance(module, ModuleType):
        return NameScope(name=scope, module=module)
    parent, _, last = scope.rpartition(".")
    holder = sys.modules.get(parent) if parent else None
    if not isinstance(holder, ModuleType):
        waited = parent or scope
        if not module_exists(waited.split(".", 1)[0]):
            raise TargetResolutionError(
                f"{scope}: no module named {waited.split('.', 1)[0]!r} is importable; "
                "expected a scope module or module.Class"
            )
        return PendingTarget(target=scope, module=_first_missing(waited))
    found = vars(holder).get(last, ABSENT)
    if found is ABSENT:
        if module_exists(scope):
            return PendingTarget(target=scope, module=scope)
        raise TargetResolutionError(f"{scope}: module {parent} has no class {last!r}")
    if not isinstance(found, type):
        raise TargetResolutionError(
            f"{scope}: {parent}.{last} is a {type(found).__name__}, not a class; a scope is "
            "a module or a class at its module's top level"
        )
    return NameScope(name=scope, module=holder, cls=found)


def _first_missing(dotted: str) -> str:
    """The shortest prefix of `dotted` not in sys.modules: the import a scope waits for."""
    parts = dotted.split(".")
    for index in range(1, len(parts) + 1):
        name = ".".join(parts[:index])
        if name not in sys.modules:
            return name
    return dotted

"""Modules a fix added, refused while it is reverted: their import fails as before the fix.

A reverted fix's `added_modules` (and the modules under them) cannot be imported: the
import raises ModuleNotFoundError naming the module, as the pre-fix program does. The
fix's own changed modules (its patch targets' and names scopes' modules) may still import
them while their post-fix code runs, before their revert lands; once it has landed, a
module so imported, or imported before the revert began, is taken out of sys.modules and
its parent package's attribute, and both are put back when the revert ends. Used under
the revert lock.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import ModuleType

from prtoggle.patching.import_hook import HiddenModulesFinder
from prtoggle.recipes.registry import Recipe


@dataclass
class _Hidden:
    """A PR's hidden modules, the modules allowed to import them, what was taken out."""

    modules: tuple[str, ...]
    importers: frozenset[str]
    taken: dict[str, tuple[ModuleType, bool]] = field(default_factory=dict)
    """Module name -> (module, whether its parent package had it as an attribute)."""


_HIDDEN: dict[int, _Hidden] = {}


def hide(pr: int, recipes: tuple[Recipe, ...]) -> None:
    """Refuse the modules `recipes` added from now on, and take out those imported already."""
    modules = tuple(dict.fromkeys(m for recipe in recipes for m in recipe.added_modules))
    if not modules or pr in _HIDDEN:
        return
    importers = frozenset(_fix_modules(recipes))
    _HIDDEN[pr] = _Hidden(modules, importers)
    _FINDER.install()
    take_out(pr)


def take_out(pr: int) -> None:
    """Take the hidden modules of `pr` now in sys.modules out of it (and of their parents)."""
    hidden = _HIDDEN.get(pr)
    if hidden is None:
        return
    for name in [n for n in sys.modules if _under_any(n, hidden.modules)]:
        module = sys.modules.pop(name)
        parent, _, child = name.rpartition(".")
        owner = sys.modules.get(parent) if parent else None
        had = owner is not None and getattr(owner, child, None) is module
        if had:
            delattr(owner, child)
        hidden.taken.setdefault(name, (module, had))


def show(pr: int) -> None:
    """End the refusal of `pr`'s modules; put back what was taken out, as it was."""
    hidden = _HIDDEN.pop(pr, None)
    if hidden is None:
        return
    for name, (module, had) in hidden.taken.items():
        sys.modules.setdefault(name, module)
        parent, _, child = name.rpartition(".")
        owner = sys.modules.get(parent) if parent else None
        if had and owner is not None:
            setattr(owner, child, module)
    if not _HIDDEN:
        _FINDER.uninstall()


def hidden_modules() -> tuple[str, ...]:
    """Every module refused now, over every PR."""
    return tuple(dict.fromkeys(m for hidden in _HIDDEN.values() for m in hidden.modules))


def reset() -> None:
    """End every refusal (tests; a process's last restore)."""
    for pr in list(_HIDDEN):
        show(pr)


def _is_hidden(name: str) -> bool:
    return any(_under_any(name, hidden.modules) for hidden in _HIDDEN.values())


def _may_import(importer: str, name: str) -> bool:
    """The fix's own changed modules and its added modules may import what it added."""
    for hidden in _HIDDEN.values():
        if _under_any(name, hidden.modules) and (
            importer in hidden.importers or _under_any(importer, hidden.modules)
        ):
            return True
    return False


def _fix_modules(recipes: tuple[Recipe, ...]) -> set[str]:
    """The modules whose code the fix changed: every prefix of its targets and scopes."""
    dotted = [p.target for r in recipes for p in r.patches] + [
        n.scope for r in recipes for n in r.names
    ]
    found: set[str] = set()
    for name in dotted:
        parts = name.split(".")
        found.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return found


def _under_any(name: str, modules: tuple[str, ...]) -> bool:
    return any(name == m or name.startswith(m + ".") for m in modules)


_FINDER = HiddenModulesFinder(is_hidden=_is_hidden, may_import=_may_import)

"""Where a target's module stands in this process: not imported, still executing, complete."""

from __future__ import annotations

import sys

from prtoggle.errors import PatchApplicationError


def imported_holder(target: str) -> tuple[str, object] | None:
    """The longest prefix of `target` that is in sys.modules, and that module."""
    parts = target.split(".")
    for index in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:index])
        module = sys.modules.get(name)
        if module is not None:
            return name, module
    return None


def is_executing(name: str) -> bool:
    """Whether module `name` is in sys.modules with its body still running."""
    module = sys.modules.get(name)
    return module is not None and is_initialising(module)


def is_initialising(module: object) -> bool:
    """Whether importlib is still executing `module` (its body has not finished)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def pending_module(target: str, *, finished: str | None) -> str | None:
    """The module `target` still waits for, or None when its holder module is complete.

    A module another import is still executing (import cycles, half-initialised parents)
    is not complete, except `finished`, whose body has just run.
    """
    holder = imported_holder(target)
    if holder is None:
        # Not even the top-level package is imported. Whether it can be found is not asked
        # here: sys.path still changes after start-up (the script's directory), and a
        # collection's package may be absent from this environment altogether.
        return target.split(".", 1)[0]
    name, module = holder
    if name != finished and is_initialising(module):
        return name
    return None


def holder_is_ready(target: str) -> bool:
    """Whether `target` could be resolved now: its holder module is complete and has it.

    A holder left behind by a failed import (a namespace subpackage whose parent package
    raised and was removed from sys.modules) cannot even be searched: not ready.
    """
    if pending_module(target, finished=None) is not None or imported_holder(target) is None:
        return False
    from prtoggle.patching.targets import PendingTarget, resolve_loaded  # a module is loaded

    try:
        return not isinstance(resolve_loaded(target), PendingTarget)
    except PatchApplicationError:
        return True
    except Exception:  # importlib's own lookups fail there (KeyError: the parent's name)
        return False


def scope_is_ready(scope: str) -> bool:
    """Whether a `names` scope could land now: its own module (a class scope's too) is
    imported and complete. A package imported without the scope's module is not ready:
    that revert is not yet in force, not a failure."""
    if pending_module(f"{scope}.__names__", finished=None) is not None:
        return False
    from prtoggle.patching.name_scopes import resolve_scope  # a module is loaded
    from prtoggle.patching.targets import PendingTarget

    try:
        return not isinstance(resolve_scope(scope), PendingTarget)
    except PatchApplicationError:
        return True  # imported, and the scope is not what the recipe says: never landed

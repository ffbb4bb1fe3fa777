"""Callbacks at the end of an import already under way, and after importlib.reload."""

from __future__ import annotations

import importlib.machinery
import sys
import threading
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from prtoggle.patching.import_hook import ModuleLoadedFinder

_SPEC_CLASSES: dict[type, type] = {}
_CALLBACKS = "_prtoggle_when_initialised"
_LOCK = threading.Lock()


def call_when_initialised(module: ModuleType, callback: Callable[[str], None]) -> bool:
    """Call `callback(name)` the moment the import now executing `module` finishes.

    It runs in the importing thread, whichever it is, right after importlib marks the
    module complete (`__spec__._initializing` set back to False), and only when the import
    succeeded; what it raises reaches the importing statement. False (nothing registered)
    when `module` is not being imported now. Each callback is called once.
    """
    spec = getattr(module, "__spec__", None)
    if not isinstance(spec, importlib.machinery.ModuleSpec):
        return False
    with _LOCK:
        if not getattr(spec, "_initializing", False):
            return False
        callbacks: list[Callable[[str], None]] = spec.__dict__.setdefault(_CALLBACKS, [])
        if callback not in callbacks:
            callbacks.append(callback)
        spec.__class__ = _notifying_class(type(spec))
    return True


class ReloadWatch:
    """Calls `on_reloaded(name)` after `importlib.reload` re-executes a watched module.

    Finders are asked about a module already in sys.modules only by a reload, so a finder
    that answers for those names alone costs ordinary imports nothing.
    """

    def __init__(self, *, on_reloaded: Callable[[str], None]) -> None:
        self._modules: frozenset[str] = frozenset()
        self._finder = ModuleLoadedFinder(is_watched=self._is_reload, on_loaded=on_reloaded)

    def watch(self, modules: Iterable[str]) -> None:
        """Watch exactly `modules` from now on (none: the finder leaves sys.meta_path)."""
        self._modules = frozenset(modules)
        if self._modules:
            self._finder.install()
        else:
            self._finder.uninstall()

    def _is_reload(self, name: str) -> bool:
        return name in self._modules and name in sys.modules


def _notifying_class(base: type) -> type:
    """A subclass of the spec's class that notices `_initializing` going back to False."""
    if base in _SPEC_CLASSES.values():
        return base
    if base not in _SPEC_CLASSES:

        def __setattr__(self: Any, name: str, value: object) -> None:
            base.__setattr__(self, name, value)  # type: ignore[call-arg]
            if name == "_initializing" and not value:
                _initialised(self, base)

        _SPEC_CLASSES[base] = type(base.__name__, (base,), {"__setattr__": __setattr__})
    return _SPEC_CLASSES[base]


def _initialised(spec: importlib.machinery.ModuleSpec, base: type) -> None:
    with _LOCK:
        spec.__class__ = base
        callbacks = spec.__dict__.pop(_CALLBACKS, [])
    module = sys.modules.get(spec.name)
    if module is None or getattr(module, "__spec__", None) is not spec:
        return  # the import failed: nothing to act on
    for callback in callbacks:
        callback(spec.name)

"""A meta-path finder that calls back after a watched module has been executed."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Collection, Sequence
from types import FrameType, ModuleType
from typing import Any


class _FirstFinder(importlib.abc.MetaPathFinder):
    """A finder that puts itself first on sys.meta_path and takes itself off."""

    def install(self) -> None:
        """Put the finder first on sys.meta_path (again, if another finder went before it)."""
        if sys.meta_path[:1] != [self]:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


class ModuleLoadedFinder(_FirstFinder):
    """Wraps the loader of watched modules so `on_loaded(name)` runs right after exec_module.

    `on_requested(name)`, when given, runs at the start of every import that reaches the
    finders while it is installed (whether watched or not): a chance to act on modules that
    finished importing without passing through a wrapped loader (import cycles). The
    callbacks are called without any lock held by this class; the finder itself never
    imports anything. Several such finders may watch one module: each asks only the finders
    after it on sys.meta_path, so each is notified once and none asks another in a loop.
    """

    def __init__(
        self,
        *,
        is_watched: Callable[[str], bool],
        on_loaded: Callable[[str], None],
        on_requested: Callable[[str], None] | None = None,
    ) -> None:
        self._is_watched = is_watched
        self._on_loaded = on_loaded
        self._on_requested = on_requested

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if self._on_requested is not None:
            self._on_requested(fullname)
        if not self._is_watched(fullname):
            return None
        spec = _find_with_others(self, fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _NotifyingLoader(spec.loader, self._on_loaded)
        return spec


def notifies_when_loaded(module: ModuleType) -> bool:
    """Whether `module` is executing through a finder's wrapped loader (a call will come)."""
    return isinstance(getattr(getattr(module, "__spec__", None), "loader", None), _NotifyingLoader)


class _NotifyingLoader(importlib.abc.Loader):
    """Delegates to the real loader; after exec_module puts it back and notifies."""

    def __init__(self, loader: Any, on_loaded: Callable[[str], None]) -> None:
        self._loader = loader
        self._on_loaded = on_loaded

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        real = self._loader
        while isinstance(real, _NotifyingLoader):  # another finder's wrapper inside this one
            real = real._loader
        if module.__spec__ is not None and isinstance(module.__spec__.loader, _NotifyingLoader):
            module.__spec__.loader = real
        if isinstance(getattr(module, "__loader__", None), _NotifyingLoader):
            module.__loader__ = real
        self._on_loaded(module.__name__)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def _find_with_others(
    finder: ModuleLoadedFinder,
    fullname: str,
    path: Sequence[str] | None,
    target: ModuleType | None,
) -> importlib.machinery.ModuleSpec | None:
    finders = list(sys.meta_path)
    # Only the finders after this one: the import system reached it because those before
    # declined, and another ModuleLoadedFinder before it would ask this one back, forever.
    later = finders[finders.index(finder) + 1 :] if finder in finders else finders
    for other in later:
        find_spec = getattr(other, "find_spec", None)
        if find_spec is None:
            continue
        spec = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


class HiddenModulesFinder(_FirstFinder):
    """Refuses modules a reverted fix added: importing one raises ModuleNotFoundError naming
    it, as before the fix, except from the modules `may_import(importer, name)` allows (the
    fix's own changed modules, whose post-fix code runs until their revert lands).

    `is_hidden(name)` says whether `name` (or a package above it) is refused now.
    """

    def __init__(
        self, *, is_hidden: Callable[[str], bool], may_import: Callable[[str, str], bool]
    ) -> None:
        self._is_hidden = is_hidden
        self._may_import = may_import

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if self._is_hidden(fullname) and not self._may_import(_importer(), fullname):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


_MACHINERY_FILES = frozenset({__file__, importlib.__file__})


def calling_module(*, skip: Collection[str] = ()) -> str:
    """`__name__` of the module whose code runs now, the import machinery (and the files
    `skip`) passed over: who asks for a module or a module attribute."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<frozen importlib") or name in _MACHINERY_FILES or name in skip):
            return str(frame.f_globals.get("__name__", ""))
        frame = frame.f_back
    return ""


def _importer() -> str:
    return calling_module()

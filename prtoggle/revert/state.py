"""Process-global revert state: fixes held in force, patched now or when their module is ready.

A target whose module is not imported yet, or is still being executed (import cycles,
half-initialised parents), is pending. Every import under the top-level package of a
pending target is watched: when any such module finishes, and whenever a new import
starts, the pending targets whose module is complete are patched. A fix that cannot be
applied then is restored in every collection and the importing statement gets the error.
A fix whose `applies_to` range excludes the installed distribution is never patched: when
its target's module is loaded it is refused (VersionRangeError), or left out with a warning
where another collection's fix of the same PR is patched.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FunctionType

from prtoggle.errors import PatchApplicationError, VersionRangeError
from prtoggle.patching.import_hook import ModuleLoadedFinder
from prtoggle.patching.swap import CodeSwapper, EditLayer
from prtoggle.patching.targets import PendingTarget, resolve_loaded
from prtoggle.recipes.registry import Patch, Recipe, Registry, default_registry
from prtoggle.recipes.versions import require_installed_in_range

logger = logging.getLogger(__name__)


@dataclass
class _ActiveFix:
    """One collection's fix of a PR in force: targets patched now, targets still pending."""

    fix: Recipe
    patched: list[tuple[str, FunctionType]] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)  # target -> module it waits for


@dataclass
class _Revert:
    """A PR in force: its fix in each collection, and who holds it."""

    pr: int
    fixes: list[_ActiveFix]
    pinned: bool = False  # held by apply_revert / SGLANG_DEBUG_REVERT_PR until restore()
    blocks: int = 0  # open reverted() blocks


_LOCK = threading.RLock()
_ACTIVE: dict[int, _Revert] = {}
_SWAPPER = CodeSwapper()


@dataclass
class _Watch:
    """Top-level packages of pending targets; replaced whole so readers need no lock."""

    packages: frozenset[str] = frozenset()


_WATCH = _Watch()


@dataclass
class _ChildGuard:
    """Set by the bootstrap: how a reverting child reacts to a revert that cannot land."""

    exit_status: int | None = None  # stop the process with this status on a deferred failure
    prefix: str = ""  # starts the one stderr line
    stderr_fd: int | None = None  # the stderr of start-up, kept from later fd-level capture


_GUARD = _ChildGuard()
_THREAD = threading.local()  # .depth: how deep this thread is inside toggle's lock


def hold(pr: int, registry: Registry | None, *, pin: bool) -> None:
    """Put `pr` in force (every collection, all targets or none) or add one more holder.

    `pin`: the hold of apply_revert / SGLANG_DEBUG_REVERT_PR (one, until released);
    otherwise one more reverted() block. Caller holds locked().
    """
    revert = _ACTIVE.get(pr) or _activate(pr, registry)
    if pin:
        revert.pinned = True
    else:
        revert.blocks += 1


def release(pr: int, *, pin: bool) -> None:
    """Drop one hold of `pr`; its code is restored when nothing holds it any more."""
    revert = _ACTIVE.get(pr)
    if revert is None:
        return
    if pin:
        revert.pinned = False
    else:
        revert.blocks -= 1
    if revert.blocks <= 0 and not revert.pinned:
        _deactivate(revert)


def is_pinned(pr: int) -> bool:
    revert = _ACTIVE.get(pr)
    return revert is not None and revert.pinned


def held_prs() -> tuple[int, ...]:
    """The PRs in force, ascending."""
    return tuple(sorted(_ACTIVE))


def targets_of(pr: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(patched now, pending) targets of `pr` over every collection; ((), ()) if not held."""
    revert = _ACTIVE.get(pr)
    if revert is None:
        return (), ()
    patched = tuple(target for active in revert.fixes for target, _ in active.patched)
    pending = tuple(target for active in revert.fixes for target in active.pending)
    return patched, pending


def labels_of(pr: int) -> tuple[str, ...]:
    """`collection/PR` of each fix of `pr` in force; () if not held."""
    revert = _ACTIVE.get(pr)
    return () if revert is None else tuple(active.fix.label for active in revert.fixes)


def unapplied_imported_targets() -> dict[int, tuple[str, ...]]:
    """Pending targets whose module has been imported all the same (should never happen).

    Used at a reverting child's exit to report any requested revert that never landed.
    """
    with locked():
        found: dict[int, tuple[str, ...]] = {}
        for pr, revert in _ACTIVE.items():
            late = tuple(
                target
                for active in revert.fixes
                for target in active.pending
                if _holder_is_ready(target)
            )
            if late:
                found[pr] = late
        return found


def stop_process_on_failure(*, exit_status: int, prefix: str) -> None:
    """A deferred revert that fails at import ends the process: `prefix: error`, status."""
    _GUARD.prefix = prefix
    _GUARD.exit_status = exit_status
    if _GUARD.stderr_fd is None:
        # A copy of fd 2 as it is now: a harness that later redirects fd 2 (pytest's
        # capture during collection) would otherwise swallow the line when we _exit.
        _GUARD.stderr_fd = os.dup(2)


@contextmanager
def locked() -> Iterator[None]:
    """Hold the revert lock, marking this thread as inside it (see _on_import_requested)."""
    with _LOCK:
        _THREAD.depth = getattr(_THREAD, "depth", 0) + 1
        try:
            yield
        finally:
            _THREAD.depth -= 1


def _activate(pr: int, registry: Registry | None) -> _Revert:
    fixes = (registry or default_registry()).find(pr)
    revert = _Revert(pr=pr, fixes=[_ActiveFix(fix=fix) for fix in fixes])
    try:
        _patch_ready(revert, finished=None, initial=True)
    except BaseException:
        _unpatch_all(revert)
        raise
    _ACTIVE[pr] = revert
    _update_watch()
    pending = sorted({m for a in revert.fixes for m in a.pending.values()})
    if pending:
        logger.debug("PR %d: waiting for import of %s", pr, ", ".join(pending))
    return revert


def _deactivate(revert: _Revert) -> None:
    _unpatch_all(revert)
    _ACTIVE.pop(revert.pr, None)
    _update_watch()


def _patch_ready(revert: _Revert, *, finished: str | None, initial: bool) -> None:
    """Patch every target of `revert` whose module is complete; the others wait.

    A fix whose `applies_to` excludes the installed version is refused (VersionRangeError)
    once its target's module is loaded, unless another collection's fix of the same PR is
    patched: then it is left out with a warning (a PR number shared by two collections,
    e.g. the demo engine's and sglang's, in a process that loaded both).
    """
    refused: list[tuple[_ActiveFix, VersionRangeError]] = []
    for active in revert.fixes:
        targets = [p.target for p in active.fix.patches] if initial else list(active.pending)
        try:
            for target in targets:
                _patch_or_wait(active, target, finished=finished)
        except VersionRangeError as exc:
            refused.append((active, exc))
    for active, error in refused:
        reverted = [other.fix.label for other in revert.fixes if other.patched]
        if not reverted:
            raise error
        active.pending.clear()
        logger.warning("%s; left out, %s reverted instead", error, ", ".join(reverted))


def _patch_or_wait(active: _ActiveFix, target: str, *, finished: str | None) -> None:
    """Patch `target` if its module has finished importing, else record it as pending."""
    waiting_for = _pending_module(target, finished=finished)
    if waiting_for is not None:
        active.pending[target] = waiting_for
        return
    resolved = resolve_loaded(target)
    if isinstance(resolved, PendingTarget):
        active.pending[target] = resolved.module
        return
    require_installed_in_range(active.fix)
    layer = EditLayer(
        pr=active.fix.pr, patch=_patch_for(active.fix, target), yaml_path=str(active.fix.path)
    )
    _SWAPPER.patch(resolved.function, layer)
    active.patched.append((target, resolved.function))
    active.pending.pop(target, None)


def _unpatch_all(revert: _Revert) -> None:
    for active in reversed(revert.fixes):
        while active.patched:
            _target, function = active.patched[-1]
            _SWAPPER.unpatch(function, active.fix.pr)
            active.patched.pop()


def _patch_for(fix: Recipe, target: str) -> Patch:
    return next(patch for patch in fix.patches if patch.target == target)


def _holder(target: str) -> tuple[str, object] | None:
    """The longest prefix of `target` that is in sys.modules, and that module."""
    parts = target.split(".")
    for index in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:index])
        module = sys.modules.get(name)
        if module is not None:
            return name, module
    return None


def _is_initialising(module: object) -> bool:
    """Whether importlib is still executing `module` (its body has not finished)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _pending_module(target: str, *, finished: str | None) -> str | None:
    """The module `target` still waits for, or None when its holder module is complete.

    A module another import is still executing (import cycles, half-initialised parents)
    is not complete, except `finished`, whose body has just run.
    """
    holder = _holder(target)
    if holder is None:
        # Not even the top-level package is imported. Whether it can be found is not asked
        # here: sys.path still changes after start-up (the script's directory), and a
        # collection's package may be absent from this environment altogether.
        return target.split(".", 1)[0]
    name, module = holder
    if name != finished and _is_initialising(module):
        return name
    return None


def _holder_is_ready(target: str) -> bool:
    """Whether `target` could be resolved now: its holder module is complete and has it."""
    if _pending_module(target, finished=None) is not None or _holder(target) is None:
        return False
    try:
        return not isinstance(resolve_loaded(target), PendingTarget)
    except PatchApplicationError:
        return True


def _retry_pending(*, finished: str | None) -> None:
    """Patch every pending target whose module is complete now (caller holds _LOCK).

    A fix that cannot be applied is restored in every collection and the error raised:
    at import time the importing statement sees it.
    """
    if getattr(_THREAD, "retrying", False):
        return
    _THREAD.retrying = True
    try:
        for pr, revert in list(_ACTIVE.items()):
            if not any(active.pending for active in revert.fixes):
                continue
            try:
                _patch_ready(revert, finished=finished, initial=False)
            except PatchApplicationError as exc:
                _deactivate(revert)
                where = f"when {finished} was imported" if finished else "on import"
                raise PatchApplicationError(
                    f"PR {pr} could not be reverted {where}, so it is not reverted at all: {exc}"
                ) from exc
            if not any(active.pending for active in revert.fixes):
                logger.debug("PR %d reverted (after import of %s)", pr, finished or "a module")
    finally:
        _THREAD.retrying = False
    _update_watch()


def _update_watch() -> None:
    """Watch imports under the top-level packages of pending targets (none: no hook)."""
    packages = {
        target.split(".", 1)[0]
        for revert in _ACTIVE.values()
        for active in revert.fixes
        for target in active.pending
    }
    _WATCH.packages = frozenset(packages)
    if packages:
        _FINDER.install()
    else:
        _FINDER.uninstall()


def _is_watched(module: str) -> bool:
    return module.split(".", 1)[0] in _WATCH.packages


def _on_module_loaded(module: str) -> None:
    try:
        with locked():
            _retry_pending(finished=module)
    except PatchApplicationError as exc:
        _stop_if_guarded(exc)
        raise


def _on_import_requested(module: str) -> None:
    """A new import is starting: a module may have completed since; patch what is ready.

    Skipped inside toggle's own work (resolving asks the finders too) and while another
    thread holds the lock (it is applying or restoring, and retries itself).
    """
    if getattr(_THREAD, "depth", 0) or not _LOCK.acquire(blocking=False):
        return
    try:
        _THREAD.depth = 1
        _retry_pending(finished=None)
    except PatchApplicationError as exc:
        _stop_if_guarded(exc)
        raise
    finally:
        _THREAD.depth = 0
        _LOCK.release()


def _stop_if_guarded(exc: PatchApplicationError) -> None:
    """In a guarded child, a revert that cannot land ends the process (one stderr line)."""
    if _GUARD.exit_status is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    line = f"{_GUARD.prefix}: {exc}\n".encode(errors="replace")
    os.write(2 if _GUARD.stderr_fd is None else _GUARD.stderr_fd, line)
    os._exit(_GUARD.exit_status)


_FINDER = ModuleLoadedFinder(
    is_watched=_is_watched, on_loaded=_on_module_loaded, on_requested=_on_import_requested
)

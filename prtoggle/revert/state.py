"""Process-global revert state: fixes held in force, patched now or when their module is ready.

A target whose module is not imported yet, or is still being executed (import cycles,
half-initialised parents), is pending. Pending targets are indexed by every module prefix
of their dotted path: when one of those modules finishes importing, the targets under it
whose module is complete are patched; any other import costs the hook one dict lookup.
A module a target waits for that was already executing outside the hook (a module that
asks for its own revert) is checked at each import until it has finished. A fix that
cannot be applied then is restored in every collection and the importing statement gets
the error.
A fix whose `applies_to` range excludes the installed distribution is never patched: when
its target's module is loaded it is refused (VersionRangeError), or left out with a warning
where another collection's fix of the same PR is patched.
This module only raises: the child layer (prtoggle.revert.child) listens for failures and
landings (prtoggle.revert.events) and decides whether a failure ends the process.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prtoggle.errors import PatchApplicationError, PrToggleError, VersionRangeError
from prtoggle.patching.import_hook import ModuleLoadedFinder
from prtoggle.patching.module_events import ReloadWatch, call_when_initialised
from prtoggle.recipes.registry import Recipe, Registry, default_registry
from prtoggle.revert import (
    added_modules,
    events,
    fix_landing,
    lent_names,
    module_readiness,
)
from prtoggle.revert.fix_landing import ActiveRecipe
from prtoggle.revert.pending_index import PendingIndex

if TYPE_CHECKING:
    from prtoggle.patching.commit import Commit
    from prtoggle.patching.swap import CodeSwapper

logger = logging.getLogger(__name__)


@dataclass
class _Revert:
    """A PR in force: its recipe in each collection, and who holds it."""

    pr: int
    recipes: list[ActiveRecipe]
    pinned: bool = False  # held by apply_revert / SGLANG_DEBUG_REVERT_PR until restore()
    blocks: int = 0  # open reverted() blocks


_LOCK = threading.RLock()
_ACTIVE: dict[int, _Revert] = {}

_WATCH = PendingIndex()
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


def swapper() -> CodeSwapper:
    """The one record of swapped functions, shared by reverts and the source_patcher API.

    Patching through it stacks in any order and restores to the very original code and
    values in any order. Use it under locked().
    """
    return fix_landing.swapper()


def is_pinned(pr: int) -> bool:
    revert = _ACTIVE.get(pr)
    return revert is not None and revert.pinned


def held_prs() -> tuple[int, ...]:
    """The PRs in force, ascending."""
    return tuple(sorted(_ACTIVE))


def recipes_of(pr: int) -> tuple[Recipe, ...]:
    """The recipes `pr` is in force with (one per collection chosen); () if not held."""
    revert = _ACTIVE.get(pr)
    return () if revert is None else tuple(active.recipe for active in revert.recipes)


def targets_of(pr: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(patched now, pending) targets of `pr` over every collection; ((), ()) if not held."""
    revert = _ACTIVE.get(pr)
    if revert is None:
        return (), ()
    patched = tuple(dict.fromkeys(t for active in revert.recipes for t, _ in active.patched))
    pending = tuple(target for active in revert.recipes for target in active.pending)
    return patched, pending


def waiting_of(pr: int) -> tuple[str, ...]:
    """What of `pr`'s recipes that landed here waits for a module never imported (`names
    of SCOPE`, or a target): that part of the revert is not yet in force."""
    revert = _ACTIVE.get(pr)
    every = () if revert is None else revert.recipes
    fixes = [active for active in every if active.patched or active.names_applied]
    late = {item for active in fixes for item in active.imported_but_pending()}
    found = [
        f"names of {path.removesuffix('.__names__')}" if path.endswith(".__names__") else path
        for active in fixes
        for path, _module in active.waits()
    ]
    return tuple(item for item in dict.fromkeys(found) if item not in late)


def labels_of(pr: int) -> tuple[str, ...]:
    """`collection/PR` of each fix of `pr` in force; () if not held."""
    revert = _ACTIVE.get(pr)
    return () if revert is None else tuple(active.recipe.label for active in revert.recipes)


def landed_labels(pr: int) -> tuple[str, ...]:
    """`collection/PR` of each fix of `pr` with at least one target patched now."""
    revert = _ACTIVE.get(pr)
    fixes = () if revert is None else revert.recipes
    return tuple(active.recipe.label for active in fixes if active.patched or active.names_applied)


def unapplied_imported_targets() -> dict[int, tuple[str, ...]]:
    """Pending targets whose module has been imported all the same (should never happen).

    Used at a reverting child's exit to report any requested revert that never landed.
    """
    with locked():
        found: dict[int, tuple[str, ...]] = {}
        for pr, revert in _ACTIVE.items():
            late = tuple(t for active in revert.recipes for t in active.imported_but_pending())
            if late:
                found[pr] = late
        return found


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
    revert = _Revert(pr=pr, recipes=[ActiveRecipe(recipe=fix) for fix in fixes])
    _patch_ready(revert, finished=None, initial=True)  # all in one step, or nothing
    _ACTIVE[pr] = revert
    added_modules.hide(pr, tuple(active.recipe for active in revert.recipes))
    lent_names.lend(pr, revert.recipes)
    _update_watch()
    pending = sorted({m for a in revert.recipes for m in a.pending.values()})
    if pending:
        logger.debug("PR %d: waiting for import of %s", pr, ", ".join(pending))
    return revert


def _deactivate(revert: _Revert) -> None:
    added_modules.show(revert.pr)
    lent_names.end(revert.pr)
    _unpatch_all(revert)
    _ACTIVE.pop(revert.pr, None)
    _update_watch()


def _patch_ready(revert: _Revert, *, finished: str | None, initial: bool) -> None:
    """Patch every target of `revert` whose module is complete; the others wait.

    Prepared first (compiled, checked: a failure changes nothing and raises), then landed
    in one step no other thread sees half done (prtoggle.patching.commit).

    A fix whose `applies_to` excludes the installed version is refused (VersionRangeError)
    once its target's module is loaded, unless another collection's fix of the same PR is
    patched: then it is left out with a warning (a PR number shared by two collections,
    e.g. the demo engine's and sglang's, in a process that loaded both).
    """
    commit = _commit(revert)
    try:
        _plan_ready(revert, finished=finished, initial=initial, commit=commit)
    except BaseException:
        commit.abort()
        raise
    commit.run()


def _plan_ready(revert: _Revert, *, finished: str | None, initial: bool, commit: Commit) -> None:
    refused: list[tuple[ActiveRecipe, VersionRangeError]] = []
    for active in revert.recipes:
        try:
            active.land_ready(
                finished=finished, initial=initial, on_wait=_land_when_import_ends, commit=commit
            )
        except VersionRangeError as exc:
            refused.append((active, exc))
    for active, error in refused:
        reverted = [o.recipe.label for o in revert.recipes if o.patched or o.names_applied]
        if not reverted:
            raise error
        active.pending.clear()
        active.names_pending.clear()
        logger.warning("%s; left out, %s reverted instead", error, ", ".join(reverted))
    for active in revert.recipes:  # names, then swaps, then the global check (issue 27)
        active.check_globals(commit)


def _unpatch_all(revert: _Revert) -> None:
    """Put back everything `revert` landed, in one step (or, failing to prepare, nothing)."""
    commit = _commit(revert)
    try:
        for active in reversed(revert.recipes):
            active.undo(commit)
    except BaseException:
        commit.abort()
        raise
    commit.run()


def _commit(revert: _Revert) -> Commit:
    from prtoggle.patching.commit import Commit

    return Commit(label=f"PR {revert.pr}")


def _retry_pending(*, finished: str | None, prs: Collection[int]) -> None:
    """Patch the pending targets of `prs` whose module is complete now (caller holds _LOCK).

    A fix that cannot be applied is restored in every collection and the error raised:
    at import time the importing statement sees it.
    """
    if getattr(_THREAD, "retrying", False):
        return
    _THREAD.retrying = True
    landed: list[int] = []
    try:
        for pr, revert in [(pr, revert) for pr, revert in _ACTIVE.items() if pr in prs]:
            if not any(active.pending or active.names_pending for active in revert.recipes):
                continue
            try:
                _patch_ready(revert, finished=finished, initial=False)
            except Exception as exc:  # any failure: all or nothing (issue 19.7)
                _deactivate(revert)
                where = f"when {finished} was imported" if finished else "on import"
                why = str(exc) if isinstance(exc, PrToggleError) else f"{type(exc).__name__}: {exc}"
                raise PatchApplicationError(
                    f"PR {pr} could not be reverted {where}, so it is not reverted at all: {why}"
                ) from exc
            if not any(active.pending or active.names_pending for active in revert.recipes):
                logger.debug("PR %d reverted (after import of %s)", pr, finished or "a module")
            added_modules.take_out(pr)  # imported by the fix's own modules as they ran
            lent_names.lend(pr, revert.recipes)
            landed.append(pr)
    finally:
        _THREAD.retrying = False
    _update_watch()
    for pr in landed:
        events.landed(pr)


def _update_watch() -> None:
    """Index the pending targets by module prefix for the hook (none pending: no hook)."""
    _WATCH.rebuild(
        (revert.pr, target, waiting_for)
        for revert in _ACTIVE.values()
        for active in revert.recipes
        for target, waiting_for in active.waits()
    )
    if _WATCH.modules:
        _FINDER.install()
    else:
        _FINDER.uninstall()
    _update_reload_watch()


def _is_watched(module: str) -> bool:
    return module in _WATCH.modules


def _on_module_loaded(module: str) -> None:
    """A wrapped module has finished: patch what is ready among the targets under it."""
    if module not in _WATCH.modules:
        return
    try:
        with locked():
            _retry_pending(finished=module, prs=_WATCH.modules.get(module, ()))
    except PatchApplicationError as exc:
        events.failed(exc)
        raise


def _on_import_requested(module: str) -> None:
    """A new import is starting: an unnotified module may have finished; patch what is ready.

    With no unnotified module (the usual case) it returns at once. Skipped inside
    toggle's own work (resolving asks the finders too) and while another thread holds
    the lock (it is applying or restoring, and retries itself).
    """
    if not _WATCH.unnotified:
        return
    if getattr(_THREAD, "depth", 0) or not _LOCK.acquire(blocking=False):
        return
    try:
        _THREAD.depth = 1
        done = [name for name in _WATCH.unnotified if not module_readiness.is_executing(name)]
        if done:
            prs = {pr for name in done for pr in _WATCH.modules.get(name, ())}
            _retry_pending(finished=None, prs=prs)
    except PatchApplicationError as exc:
        events.failed(exc)
        raise
    finally:
        _THREAD.depth = 0
        _LOCK.release()


_FINDER = ModuleLoadedFinder(
    is_watched=_is_watched, on_loaded=_on_module_loaded, on_requested=_on_import_requested
)


# --- A revert asked for while its module is importing; a patched module reloaded (19.2, 19.3)


def _land_when_import_ends(name: str) -> None:
    """A module another import is executing now: retry the moment that import ends.

    Otherwise the target waited for the next import that reaches the finders, however late.
    """
    module = sys.modules.get(name)
    if module is not None and module_readiness.is_initialising(module):
        call_when_initialised(module, _on_module_loaded)


def _update_reload_watch() -> None:
    holders = (
        module_readiness.imported_holder(t)
        for r in _ACTIVE.values()
        for a in r.recipes
        for t, _ in a.patched
    )
    scopes = (
        n.scope.module.__name__
        for r in _ACTIVE.values()
        for a in r.recipes
        for _, n in a.names_applied
    )
    _RELOADS.watch([*(holder[0] for holder in holders if holder is not None), *scopes])


def _on_module_reloaded(module: str) -> None:
    """`module` was re-executed: its new function objects get the reverts the old ones have.

    The old objects stay patched (others may hold them) until the revert ends. A revert
    that no longer applies to the reloaded code ends in full and reload() raises.
    """
    try:
        with locked():
            for pr, revert in list(_ACTIVE.items()):
                commit = _commit(revert)
                try:
                    for active in revert.recipes:
                        active.reland_reloaded(
                            module, on_wait=_land_when_import_ends, commit=commit
                        )
                    for active in revert.recipes:
                        active.check_globals(commit)
                    commit.run()
                except Exception as exc:
                    commit.abort()
                    _deactivate(revert)
                    why = (
                        str(exc)
                        if isinstance(exc, PrToggleError)
                        else f"{type(exc).__name__}: {exc}"
                    )
                    raise PatchApplicationError(
                        f"PR {pr} could not be reverted again when {module} was reloaded, so "
                        f"it is not reverted at all: {why}"
                    ) from exc
            _update_watch()
    except PatchApplicationError as exc:
        events.failed(exc)
        raise


_RELOADS = ReloadWatch(on_reloaded=_on_module_reloaded)

"""Revert fixes at run time: env parsing, all-or-nothing apply/restore, deferred apply on import.

Reverts are process-global: every thread sees the reverted code, and a PR stays reverted
while anything holds it (apply_revert/SGLANG_DEBUG_REVERT_PR until restore, and every open
`reverted()` block, counted per PR). A PR number covers the fix of that number in every
collection.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FunctionType, TracebackType

from prtoggle.errors import PatchApplicationError, RevertSpecError, UnknownPRError
from prtoggle.patching.import_hook import ModuleLoadedFinder
from prtoggle.patching.swap import CodeSwapper, EditLayer
from prtoggle.patching.targets import PendingTarget, resolve_loaded
from prtoggle.protocol import REVERT_ENV
from prtoggle.registry import Fix, Patch, Registry, default_registry

logger = logging.getLogger(__name__)

BOOTSTRAP_DIR = Path(__file__).resolve().parent / "_bootstrap"


@dataclass
class _ActiveFix:
    """One collection's fix of a PR in force: targets patched now, targets still pending."""

    fix: Fix
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
_THREAD = threading.local()  # .depth: how deep this thread is inside toggle's lock


def parse_revert_spec(
    value: str, *, registered: Sequence[int], source: str = REVERT_ENV
) -> tuple[int, ...]:
    """`26521`, `26521,24856`, `26521 24856` or `all` -> PR numbers; "" -> ()."""
    text = value.strip()
    choices = _registered_text(registered)
    if not text:
        return ()
    if text.lower() == "all":
        return tuple(sorted(set(registered)))
    prs: list[int] = []
    for token in re.split(r"\s*,\s*|\s+", text):
        if not token.isdigit():
            raise RevertSpecError(
                f"{source}={value!r}: {token!r} is not a PR number; expected PR numbers "
                f"separated by commas or spaces, or 'all'; registered PRs: {choices}"
            )
        pr = int(token)
        if pr not in registered:
            raise UnknownPRError(
                f"{source}={value!r}: PR {pr} is not registered; registered PRs: {choices}"
            )
        if pr not in prs:
            prs.append(pr)
    return tuple(prs)


def maybe_revert_pr_fix() -> tuple[int, ...]:
    """Revert the fixes SGLANG_DEBUG_REVERT_PR names; returns them. Idempotent.

    The returned PRs are in force: patched now, or (for targets whose module is not
    imported yet) patched as soon as that module has finished importing. Any failure
    raises (a PrToggleError) after restoring what this call applied: a program that asked
    for a revert never runs silently unreverted.
    """
    value = os.environ.get(REVERT_ENV, "")
    if not value.strip():
        return ()
    registry = default_registry()
    prs = parse_revert_spec(value, registered=registry.prs())
    with _locked():
        taken: list[int] = []
        try:
            for pr in prs:
                if pr not in _ACTIVE or not _ACTIVE[pr].pinned:
                    apply_revert(pr, registry=registry)
                    taken.append(pr)
        except BaseException:
            for pr in reversed(taken):
                restore(pr)
            raise
    return prs


def reverted(*prs: int, registry: Registry | None = None) -> RevertedBlock:
    """Context manager: `prs` are reverted inside the block (in every collection).

    Blocks are counted per PR, across threads: a PR stays reverted until the last block
    holding it leaves (and while apply_revert holds it). Entering is all-or-nothing.
    """
    return RevertedBlock(*prs, registry=registry)


class RevertedBlock:
    """What reverted() returns; a plain object, so a block open at exit leaves no noise."""

    def __init__(self, *prs: int, registry: Registry | None = None) -> None:
        self._prs = prs
        self._registry = registry
        self._held: list[int] = []

    def __enter__(self) -> tuple[int, ...]:
        with _locked():
            held: list[int] = []
            try:
                for pr in self._prs:
                    if pr not in held:
                        _hold_block(pr, self._registry)
                        held.append(pr)
            except BaseException:
                for pr in reversed(held):
                    _release_block(pr)
                raise
            self._held = held
        return self._prs

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with _locked():
            held, self._held = self._held, []
            for pr in reversed(held):
                _release_block(pr)


def is_reverted(pr: int) -> bool:
    """True when `pr` is in force in this process: patched now or patched on import.

    patched_targets() and pending_targets() tell which targets are patched already.
    """
    with _locked():
        return pr in _ACTIVE


def patched_targets(pr: int) -> tuple[str, ...]:
    """The targets of `pr` (every collection) whose code is swapped now; () if not in force."""
    with _locked():
        revert = _ACTIVE.get(pr)
        if revert is None:
            return ()
        return tuple(target for active in revert.fixes for target, _ in active.patched)


def pending_targets(pr: int) -> tuple[str, ...]:
    """The targets of `pr` in force but waiting for their module to finish importing."""
    with _locked():
        revert = _ACTIVE.get(pr)
        if revert is None:
            return ()
        return tuple(target for active in revert.fixes for target in active.pending)


def active_reverts() -> tuple[int, ...]:
    """PRs in force: fully patched, or with targets waiting for a module's import."""
    with _locked():
        return tuple(sorted(_ACTIVE))


def apply_revert(pr: int, *, registry: Registry | None = None) -> None:
    """Revert `pr` until restore(pr): every collection's fix, all targets or none."""
    with _locked():
        revert = _ACTIVE.get(pr) or _activate(pr, registry)
        revert.pinned = True


def restore(pr: int) -> None:
    """Release apply_revert's hold; the code goes back once no reverted() block holds it."""
    with _locked():
        revert = _ACTIVE.get(pr)
        if revert is None:
            return
        revert.pinned = False
        if revert.blocks == 0:
            _deactivate(revert)


def unapplied_imported_targets() -> dict[int, tuple[str, ...]]:
    """Pending targets whose module has been imported all the same (should never happen).

    Used at a reverting child's exit to report any requested revert that never landed.
    """
    with _locked():
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


def child_env(prs: Sequence[int], *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a child Python that reverts `prs` at start-up, prtoggle import or not.

    The bootstrap directory (a sitecustomize that chains to any other sitecustomize)
    goes first on PYTHONPATH; SGLANG_DEBUG_REVERT_PR is set ("" for no PR, so a
    parent's value is not inherited). PRTOGGLE_YAML_PATH passes through from `base`.
    """
    env = dict(os.environ if base is None else base)
    existing = env.get("PYTHONPATH", "")
    paths = [str(BOOTSTRAP_DIR), *(p for p in existing.split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env[REVERT_ENV] = ",".join(str(pr) for pr in prs)
    return env


def _hold_block(pr: int, registry: Registry | None) -> None:
    revert = _ACTIVE.get(pr) or _activate(pr, registry)
    revert.blocks += 1


def _release_block(pr: int) -> None:
    revert = _ACTIVE.get(pr)
    if revert is None:
        return
    revert.blocks -= 1
    if revert.blocks <= 0 and not revert.pinned:
        _deactivate(revert)


def _activate(pr: int, registry: Registry | None) -> _Revert:
    fixes = (registry or default_registry()).find(pr)
    revert = _Revert(pr=pr, fixes=[_ActiveFix(fix=fix) for fix in fixes])
    try:
        for active in revert.fixes:
            for patch in active.fix.patches:
                _patch_or_wait(active, patch.target, finished=None)
    except BaseException:
        _unpatch_all(revert)
        raise
    _ACTIVE[pr] = revert
    _update_watch()
    pending = sorted({m for a in revert.fixes for m in a.pending.values()})
    if pending:
        logger.info("PR %d: waiting for import of %s", pr, ", ".join(pending))
    return revert


def _deactivate(revert: _Revert) -> None:
    _unpatch_all(revert)
    _ACTIVE.pop(revert.pr, None)
    _update_watch()


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


def _patch_for(fix: Fix, target: str) -> Patch:
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
        return None  # resolve_loaded decides: pending top-level package, or an error
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
                for active in revert.fixes:
                    for target in list(active.pending):
                        _patch_or_wait(active, target, finished=finished)
            except PatchApplicationError as exc:
                _deactivate(revert)
                where = f"when {finished} was imported" if finished else "on import"
                raise PatchApplicationError(
                    f"PR {pr} could not be reverted {where}, so it is not reverted at all: {exc}"
                ) from exc
            if not any(active.pending for active in revert.fixes):
                logger.info("PR %d reverted (after import of %s)", pr, finished or "a module")
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
    with _locked():
        _retry_pending(finished=module)


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
    finally:
        _THREAD.depth = 0
        _LOCK.release()


@contextmanager
def _locked() -> Iterator[None]:
    """Hold the toggle lock, marking this thread as inside toggle (see _on_import_requested)."""
    with _LOCK:
        _THREAD.depth = getattr(_THREAD, "depth", 0) + 1
        try:
            yield
        finally:
            _THREAD.depth -= 1


def _registered_text(registered: Sequence[int]) -> str:
    return ", ".join(str(pr) for pr in sorted(set(registered))) if registered else "(none)"


_FINDER = ModuleLoadedFinder(
    is_watched=_is_watched, on_loaded=_on_module_loaded, on_requested=_on_import_requested
)

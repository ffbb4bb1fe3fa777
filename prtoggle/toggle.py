"""Revert fixes at run time: env parsing, all-or-nothing apply/restore, lazy apply at import."""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FunctionType

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
    """A fix in force: targets patched now, and targets waiting for their module's import."""

    fix: Fix
    patched: list[tuple[str, FunctionType]] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # target -> module awaited


_LOCK = threading.RLock()
_ACTIVE: dict[int, _ActiveFix] = {}
_SWAPPER = CodeSwapper()


def parse_revert_spec(
    value: str, *, registered: Sequence[int], source: str = REVERT_ENV
) -> tuple[int, ...]:
    """`26521`, `26521,24856`, `26521 24856` or `all` -> PR numbers; "" -> ()."""
    text = value.strip()
    choices = _registered_text(registered)
    if not text:
        return ()
    if text.lower() == "all":
        return tuple(sorted(registered))
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
    imported yet) patched when that module is imported. If one PR fails, the PRs this
    call applied are restored before the error propagates.
    """
    value = os.environ.get(REVERT_ENV, "")
    if not value.strip():
        return ()
    registry = default_registry()
    prs = parse_revert_spec(value, registered=registry.prs())
    with _LOCK:
        _apply_all(prs, registry=registry)
    return prs


@contextmanager
def reverted(*prs: int, registry: Registry | None = None) -> Iterator[tuple[int, ...]]:
    """Revert `prs` inside the block; restore on exit those this block applied (nestable)."""
    with _LOCK:
        applied = _apply_all(prs, registry=registry)
    try:
        yield prs
    finally:
        with _LOCK:
            for pr in reversed(applied):
                restore(pr)


def is_reverted(pr: int) -> bool:
    """True when every target of `pr` is patched now (none still waits for an import)."""
    with _LOCK:
        active = _ACTIVE.get(pr)
        return active is not None and not active.waiting


def active_reverts() -> tuple[int, ...]:
    """PRs in force: fully patched, or waiting for a target module's import."""
    with _LOCK:
        return tuple(sorted(_ACTIVE))


def apply_revert(pr: int, *, registry: Registry | None = None) -> None:
    """Revert one fix: all its loaded targets are patched or none are. No-op if in force."""
    with _LOCK:
        if pr in _ACTIVE:
            return
        fix = (registry or default_registry()).get(pr)
        active = _ActiveFix(fix=fix)
        try:
            for patch in fix.patches:
                _patch_or_wait(active, patch.target)
        except BaseException:
            _unpatch_all(active)
            raise
        _ACTIVE[pr] = active
        if active.waiting:
            _FINDER.install()
            logger.info(
                "PR %d: waiting for import of %s",
                pr,
                ", ".join(sorted(set(active.waiting.values()))),
            )


def restore(pr: int) -> None:
    """Put back the original code of every target of `pr`. No-op if not in force."""
    with _LOCK:
        active = _ACTIVE.pop(pr, None)
        if active is None:
            return
        try:
            _unpatch_all(active)
        except BaseException:
            _ACTIVE[pr] = active
            raise
        if not any(other.waiting for other in _ACTIVE.values()):
            _FINDER.uninstall()


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


def _apply_all(prs: Sequence[int], *, registry: Registry | None) -> list[int]:
    applied: list[int] = []
    try:
        for pr in prs:
            if pr not in _ACTIVE:
                apply_revert(pr, registry=registry)
                applied.append(pr)
    except BaseException:
        for pr in reversed(applied):
            restore(pr)
        raise
    return applied


def _patch_or_wait(active: _ActiveFix, target: str) -> None:
    resolved = resolve_loaded(target)
    if isinstance(resolved, PendingTarget):
        active.waiting[target] = resolved.module
        return
    layer = EditLayer(
        pr=active.fix.pr, patch=_patch_for(active.fix, target), yaml_path=str(active.fix.path)
    )
    _SWAPPER.patch(resolved.function, layer)
    active.patched.append((target, resolved.function))
    active.waiting.pop(target, None)


def _unpatch_all(active: _ActiveFix) -> None:
    while active.patched:
        _target, function = active.patched[-1]
        _SWAPPER.unpatch(function, active.fix.pr)
        active.patched.pop()


def _patch_for(fix: Fix, target: str) -> Patch:
    return next(patch for patch in fix.patches if patch.target == target)


def _is_watched(module: str) -> bool:
    return any(module in active.waiting.values() for active in list(_ACTIVE.values()))


def _on_module_loaded(module: str) -> None:
    with _LOCK:
        for pr, active in list(_ACTIVE.items()):
            targets = [t for t, waited in active.waiting.items() if waited == module]
            try:
                for target in targets:
                    _patch_or_wait(active, target)
            except PatchApplicationError as exc:
                _unpatch_all(active)
                del _ACTIVE[pr]
                raise PatchApplicationError(
                    f"PR {pr} could not be reverted when {module} was imported, so it is not "
                    f"reverted at all: {exc}"
                ) from exc
            if not active.waiting:
                logger.info("PR %d reverted (after import of %s)", pr, module)


def _registered_text(registered: Sequence[int]) -> str:
    return ", ".join(str(pr) for pr in sorted(registered)) if registered else "(none)"


_FINDER = ModuleLoadedFinder(is_watched=_is_watched, on_loaded=_on_module_loaded)

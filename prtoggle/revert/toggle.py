"""Revert fixes at run time: env parsing, all-or-nothing apply/restore, deferred apply on import.

Reverts are process-global: every thread sees the reverted code. A PR stays reverted while
anything holds it: apply_revert / SGLANG_DEBUG_REVERT_PR until restore(), and every open
`reverted()` block, counted per PR across threads. A PR number covers its fix in every
collection. The bookkeeping lives in prtoggle.revert.state. Where SGLANG_DEBUG_REVERT_PR is
put in force, sglang's own toggle does this module's work (prtoggle.revert.sglang_toggle) and
child processes revert too (prtoggle.revert.processes).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from types import TracebackType

from prtoggle.errors import RevertSpecError, UnknownPRError
from prtoggle.protocol import BOOTSTRAP_FAILURE_EXIT_CODE, BOOTSTRAP_FAILURE_PREFIX, REVERT_ENV
from prtoggle.recipes.registry import Registry, default_registry
from prtoggle.revert import processes, sglang_toggle
from prtoggle.revert import state as revert_state
from prtoggle.revert.processes import BOOTSTRAP_DIR

__all__ = [
    "BOOTSTRAP_DIR",
    "BOOTSTRAP_FAILURE_EXIT_CODE",
    "REVERT_ENV",
    "RevertedBlock",
    "active_reverts",
    "apply_revert",
    "child_env",
    "guard_child_process",
    "is_reverted",
    "maybe_revert_pr_fix",
    "parse_revert_spec",
    "patched_targets",
    "pending_targets",
    "restore",
    "reverted",
]


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
    for a revert never runs silently unreverted. From the first call that names reverts on,
    sglang's own maybe_revert_pr_fix runs this function instead of its own recipes, and
    child Pythons of this process revert at start-up too (docs/sglang.md).
    """
    value = os.environ.get(REVERT_ENV, "")
    if not value.strip():
        return ()
    sglang_toggle.take_over()  # sglang's own toggle reads the same variable: it does ours
    registry = default_registry()
    prs = parse_revert_spec(value, registered=registry.prs())
    with revert_state.locked():
        taken: list[int] = []
        try:
            for pr in prs:
                if not revert_state.is_pinned(pr):
                    revert_state.hold(pr, registry, pin=True)
                    taken.append(pr)
        except BaseException:
            for pr in reversed(taken):
                revert_state.release(pr, pin=True)
            raise
        processes.announce_in_force(prs)
    if prs:  # children revert too; what never landed is said at exit
        processes.pass_on_to_children()
        processes.report_unapplied_at_exit()
    return prs


def reverted(*prs: int, registry: Registry | None = None) -> RevertedBlock:
    """Context manager: `prs` are reverted inside the block (in every collection).

    Blocks are counted per PR, across threads: a PR stays reverted until the last block
    holding it leaves (and while apply_revert holds it). Entering is all-or-nothing.
    """
    return RevertedBlock(*prs, registry=registry)


class RevertedBlock:
    """What reverted() returns: a plain object, so a block still open at exit is silent."""

    def __init__(self, *prs: int, registry: Registry | None = None) -> None:
        self._prs = prs
        self._registry = registry
        self._held: list[int] = []

    def __enter__(self) -> tuple[int, ...]:
        with revert_state.locked():
            held: list[int] = []
            try:
                for pr in dict.fromkeys(self._prs):
                    revert_state.hold(pr, self._registry, pin=False)
                    held.append(pr)
            except BaseException:
                for pr in reversed(held):
                    revert_state.release(pr, pin=False)
                raise
            self._held = held
        return self._prs

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        _finalizing: object = sys.is_finalizing,
    ) -> None:
        if callable(_finalizing) and _finalizing():
            return  # interpreter shutdown: nothing left to run reverted
        with revert_state.locked():
            held, self._held = self._held, []
            for pr in reversed(held):
                revert_state.release(pr, pin=False)


def is_reverted(pr: int) -> bool:
    """True when `pr` is in force in this process: patched now, or patched on import.

    patched_targets() / pending_targets() tell which of its targets are patched already.
    """
    with revert_state.locked():
        return pr in revert_state.held_prs()


def patched_targets(pr: int) -> tuple[str, ...]:
    """The targets of `pr` (every collection) whose code is swapped now; () if not in force."""
    with revert_state.locked():
        return revert_state.targets_of(pr)[0]


def pending_targets(pr: int) -> tuple[str, ...]:
    """The targets of `pr` in force but waiting for their module to finish importing."""
    with revert_state.locked():
        return revert_state.targets_of(pr)[1]


def active_reverts() -> tuple[int, ...]:
    """PRs in force: patched, or with targets waiting for their module's import."""
    with revert_state.locked():
        return revert_state.held_prs()


def apply_revert(pr: int, *, registry: Registry | None = None) -> None:
    """Revert `pr` until restore(pr): every collection's fix, all targets or none. Idempotent."""
    with revert_state.locked():
        revert_state.hold(pr, registry, pin=True)


def restore(pr: int) -> None:
    """Release apply_revert's hold; the code goes back once no reverted() block holds it."""
    with revert_state.locked():
        revert_state.release(pr, pin=True)


def guard_child_process(*, exit_status: int = BOOTSTRAP_FAILURE_EXIT_CODE) -> None:
    """Make this process (a `prtoggle run` child) strict about its requested reverts.

    A deferred revert that fails when its module is imported prints one
    `prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: ...` line on stderr and ends the
    process with `exit_status`. At exit, any requested revert whose module was imported
    but which never applied is reported on stderr, one line per PR, once per process.
    prtoggle's log lines (the one saying which reverts are in force) go to stderr.
    """
    revert_state.stop_process_on_failure(exit_status=exit_status, prefix=BOOTSTRAP_FAILURE_PREFIX)
    processes.log_to_stderr()
    processes.report_unapplied_at_exit()


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


def _registered_text(registered: Sequence[int]) -> str:
    return ", ".join(str(pr) for pr in sorted(set(registered))) if registered else "(none)"

"""Revert fixes at run time: env parsing, all-or-nothing apply/restore, deferred apply on import.

Reverts are process-global: every thread sees the reverted code. A PR stays reverted while
anything holds it: apply_revert / SGLANG_DEBUG_REVERT_PR until restore(), and every open
`reverted()` block, counted per PR across threads. A PR number uses the recipes that
prtoggle.recipes.selection's rule chooses (`C:N` names collection C's one); a PR is in
force with one set of recipes at a time. The bookkeeping lives in prtoggle.revert.state.
Where SGLANG_DEBUG_REVERT_PR is put in force, sglang's own toggle does this module's work
(prtoggle.revert.sglang_toggle) and child processes revert too (prtoggle.revert.processes).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from prtoggle.errors import RevertSpecError, UnknownPRError
from prtoggle.protocol import REVERT_ENV
from prtoggle.recipes.prs import join_prs
from prtoggle.recipes.registry import Recipe, Registry, default_registry
from prtoggle.revert import partial, process_report, processes, sglang_toggle
from prtoggle.revert import state as revert_state
from prtoggle.revert.processes import BOOTSTRAP_DIR

if TYPE_CHECKING:
    from prtoggle.recipes.selection import RevertRequest, Selection

logger = logging.getLogger(__name__)

__all__ = [
    "BOOTSTRAP_DIR",
    "REVERT_ENV",
    "RevertedBlock",
    "active_reverts",
    "apply_revert",
    "child_env",
    "is_reverted",
    "maybe_revert_pr_fix",
    "parse_revert_requests",
    "parse_revert_spec",
    "patched_targets",
    "pending_targets",
    "restore",
    "reverted",
    "select_reverts",
]


def parse_revert_spec(
    value: str, *, registered: Sequence[int], source: str = REVERT_ENV
) -> tuple[int, ...]:
    """`26521`, `26521,24856`, `26521 24856`, `sglang:27460` or `all` -> PR numbers.

    "" and "0" (sglang's default) -> (). A qualified `C:N` gives N (its collection is
    checked by parse_revert_requests, which knows the collections).
    """
    text = value.strip()
    if _is_off(text):
        return ()
    if text.lower() == "all":
        return tuple(sorted(set(registered)))
    prs: list[int] = []
    for token in _tokens(text):
        pr = _token_request(token, value=value, source=source, registered=registered).pr
        if pr not in prs:
            prs.append(pr)
    return tuple(prs)


def parse_revert_requests(
    value: str, *, registry: Registry, source: str = REVERT_ENV
) -> tuple[RevertRequest, ...] | None:
    """Parse SGLANG_DEBUG_REVERT_PR / `-r`: the requests, in order; None for `all`.

    Tokens are `N` (PR N in every collection) or `C:N` (collection C's recipe only). ""
    and "0" -> (). An unknown PR, collection or PR of a collection is an error that lists
    the choices.
    """
    text = value.strip()
    if _is_off(text):
        return ()
    if text.lower() == "all":
        return None
    requests: list[RevertRequest] = []
    for token in _tokens(text):
        request = _token_request(token, value=value, source=source, registered=registry.prs())
        if request.collection is not None:
            try:
                registry.find(request.pr, collection=request.collection)
            except UnknownPRError as exc:
                raise UnknownPRError(f"{source}={value!r}: {exc}") from exc
        if request not in requests:
            requests.append(request)
    return tuple(requests)


def select_reverts(
    requests: Sequence[RevertRequest] | None,
    *,
    registry: Registry,
    search_path: Sequence[str] | None = None,
) -> tuple[Selection, ...]:
    """The recipes each request uses (prtoggle.recipes.selection's rule), one per request.

    None (`all`) asks for every PR and keeps what takes part, leaving the rest out; an
    explicit request none of whose recipes applies is refused (RevertSpecError).
    """
    from prtoggle.recipes.selection import RevertRequest, refusal, select

    everything = requests is None
    chosen = [RevertRequest(pr) for pr in registry.prs()] if requests is None else requests
    selections = tuple(select(registry, r, search_path=search_path) for r in chosen)
    if not everything:
        for selection in selections:
            if not selection.recipes:
                raise RevertSpecError(refusal(selection))
    return selections


def maybe_revert_pr_fix() -> tuple[int, ...]:
    """Revert the fixes SGLANG_DEBUG_REVERT_PR names; returns them. Idempotent.

    The returned PRs are in force: patched now, or (for targets whose module is not
    imported yet) patched as soon as that module has finished importing. Which recipe of
    a PR is used follows prtoggle.recipes.selection's rule; a request no recipe of which
    applies is refused before anything is patched. Any failure raises (a PrToggleError)
    after restoring what this call applied: a program that asked for a revert never runs
    silently unreverted. `all` logs, as one warning, what it left out and why.
    From the first call that names reverts on, sglang's own maybe_revert_pr_fix runs this
    function instead of its own recipes, and child Pythons of this process revert at
    start-up too (docs/sglang.md).
    """
    value = os.environ.get(REVERT_ENV, "")
    if _is_off(value.strip()):
        return ()
    sglang_toggle.take_over(maybe_revert_pr_fix)  # sglang's own toggle: it does ours
    prs = _hold_requested(value)
    process_report.report_in_force(prs)  # to a `prtoggle run` parent; what never landed: at exit
    if prs:
        processes.pass_on_to_children()  # child Pythons revert at start-up too
    return prs


def reverted(*prs: int | str, registry: Registry | None = None) -> RevertedBlock:
    """Context manager: `prs` are reverted inside the block.

    Each is a PR number (its recipes chosen by prtoggle.recipes.selection's rule) or
    `"C:N"` (collection C's recipe of N). Blocks are counted per PR, across threads: a PR
    stays reverted until the last block holding it leaves (and while apply_revert holds
    it). Entering is all-or-nothing.
    """
    return RevertedBlock(*prs, registry=registry)


class RevertedBlock:
    """What reverted() returns: a plain object, so a block still open at exit is silent."""

    def __init__(self, *prs: int | str, registry: Registry | None = None) -> None:
        self._prs = prs
        self._registry = registry
        self._held: list[int] = []

    def __enter__(self) -> tuple[int | str, ...]:
        registry = self._registry or default_registry()
        per_pr = _whole_only(_recipes_per_pr(_selections_of(self._prs, registry)))
        with revert_state.locked():
            held: list[int] = []
            try:
                for pr, recipes in per_pr.items():
                    _hold(pr, recipes, registry, pin=False)
                    held.append(pr)
            except BaseException:
                for pr in reversed(held):
                    revert_state.release(pr, pin=False)
                raise
            self._held = held
        partial.warn_partial(per_pr, stacklevel=2)
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


def is_reverted(pr: int | str) -> bool:
    """True when `pr` is in force in this process: patched now, or patched on import.

    `"C:N"`: PR N is in force with collection C's recipe. patched_targets() /
    pending_targets() tell which of its targets are patched already.
    """
    number, collection = _split_spec(pr)
    with revert_state.locked():
        if number not in revert_state.held_prs():
            return False
        return collection is None or any(
            recipe.collection == collection for recipe in revert_state.recipes_of(number)
        )


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


def apply_revert(pr: int | str, *, registry: Registry | None = None) -> None:
    """Revert `pr` (N or "C:N") until restore(N): its chosen recipes, all targets or none.

    Idempotent.
    """
    chosen = registry or default_registry()
    per_pr = _whole_only(_recipes_per_pr(_selections_of((pr,), chosen)))
    for number, recipes in per_pr.items():
        with revert_state.locked():
            _hold(number, recipes, chosen, pin=True)
    partial.warn_partial(per_pr, stacklevel=2)


def restore(pr: int) -> None:
    """Release apply_revert's hold; the code goes back once no reverted() block holds it."""
    with revert_state.locked():
        revert_state.release(pr, pin=True)


def child_env(prs: Sequence[int | str], *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a child Python that reverts `prs` at start-up, prtoggle import or not.

    The bootstrap directory (a sitecustomize that chains to any other sitecustomize)
    goes first on PYTHONPATH; SGLANG_DEBUG_REVERT_PR is set ("" for no PR, so a
    parent's value is not inherited), qualified `C:N` entries as given.
    PRTOGGLE_YAML_PATH passes through from `base`, made absolute here (this process's
    working directory), so a child that changes directory reads the same recipes.
    """
    env = dict(os.environ if base is None else base)
    processes.with_start_up_hook(env)
    processes.resolve_yaml_path(env)
    env[REVERT_ENV] = ",".join(str(pr) for pr in prs)
    return env


def _hold_requested(value: str) -> tuple[int, ...]:
    """Parse SGLANG_DEBUG_REVERT_PR's `value`, choose the recipes and pin each PR (all or none)."""
    processes.resolve_yaml_path(os.environ)  # once, here: children read the same recipes
    registry = default_registry()
    requests = parse_revert_requests(value, registry=registry)
    selections = select_reverts(requests, registry=registry)
    if requests is None:
        _log_left_out(selections)
    per_pr = partial.refuse_partial(
        _recipes_per_pr(selections), everything=requests is None, source=REVERT_ENV
    )
    with revert_state.locked():
        taken: list[int] = []
        try:
            for pr, recipes in per_pr.items():
                if not revert_state.is_pinned(pr):
                    _hold(pr, recipes, registry, pin=True)
                    taken.append(pr)
        except BaseException:
            for pr in reversed(taken):
                revert_state.release(pr, pin=True)
            raise
        prs = tuple(per_pr)
        processes.announce_in_force(prs)
    return prs


def _is_off(text: str) -> bool:
    """ "" and "0" (sglang's default for the variable) mean no revert."""
    return text in ("", "0")


def _tokens(text: str) -> list[str]:
    return re.split(r"\s*,\s*|\s+", text)


def _token_request(
    token: str, *, value: str, source: str, registered: Sequence[int]
) -> RevertRequest:
    """`N` or `C:N` -> a RevertRequest; N must be registered (in some collection)."""
    from prtoggle.recipes.selection import RevertRequest

    match = _TOKEN.fullmatch(token)
    if match is None:
        raise RevertSpecError(
            f"{source}={value!r}: {token!r} is not a PR number; expected PR numbers or "
            f"COLLECTION:PR (e.g. sglang:27460) separated by commas or spaces, or 'all'; "
            f"registered PRs: {join_prs(sorted(set(registered)))}"
        )
    pr = int(match["pr"])
    if pr not in registered:
        raise UnknownPRError(
            f"{source}={value!r}: PR {pr} is not registered; registered PRs: "
            f"{join_prs(sorted(set(registered)))}"
        )
    return RevertRequest(pr=pr, collection=match["collection"])


def _split_spec(spec: int | str) -> tuple[int, str | None]:
    if isinstance(spec, int):
        return spec, None
    match = _TOKEN.fullmatch(spec.strip())
    if match is None:
        raise RevertSpecError(
            f"{spec!r} is not a PR number or COLLECTION:PR (e.g. 27460, sglang:27460)"
        )
    return int(match["pr"]), match["collection"]


def _selections_of(specs: Sequence[int | str], registry: Registry) -> tuple[Selection, ...]:
    """The selection of each spec (N or "C:N"), refused when none of its recipes applies."""
    from prtoggle.recipes.selection import RevertRequest

    requests = []
    for spec in specs:
        pr, collection = _split_spec(spec)
        if collection is not None:
            registry.find(pr, collection=collection)
        requests.append(RevertRequest(pr=pr, collection=collection))
    return select_reverts(list(dict.fromkeys(requests)), registry=registry)


def _recipes_per_pr(selections: Sequence[Selection]) -> dict[int, list[Recipe]]:
    """The recipes to put in force per PR, merged over requests; PRs with none left out."""
    per_pr: dict[int, list[Recipe]] = {}
    for selection in selections:
        for recipe in selection.recipes:
            kept = per_pr.setdefault(selection.request.pr, [])
            if recipe not in kept:
                kept.append(recipe)
    return per_pr


def _whole_only(per_pr: dict[int, list[Recipe]]) -> dict[int, list[Recipe]]:
    return partial.refuse_partial(per_pr, everything=False, source="reverted()")


def _hold(pr: int, recipes: Sequence[Recipe], registry: Registry, *, pin: bool) -> None:
    """Hold `pr` with exactly `recipes`; a PR in force with other recipes is an error."""
    if pr in revert_state.held_prs():
        in_force = revert_state.recipes_of(pr)
        missing = [recipe.label for recipe in recipes if recipe not in in_force]
        if missing:
            raise RevertSpecError(
                f"PR {pr} is in force with {', '.join(r.label for r in in_force)}; "
                f"{', '.join(missing)} cannot join it: restore PR {pr} first, then revert "
                "the recipes wanted together"
            )
    revert_state.hold(pr, registry.only(recipes), pin=pin)


def _log_left_out(selections: Sequence[Selection]) -> None:
    from prtoggle.recipes.selection import left_out_note

    note = left_out_note(selections)
    if note is not None:
        logger.warning("%s=all: %s", REVERT_ENV, note)


_TOKEN = re.compile(r"(?:(?P<collection>[A-Za-z0-9_][A-Za-z0-9_.-]*):)?(?P<pr>[0-9]+)")

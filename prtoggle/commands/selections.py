"""The recipes a command's `-r` and `--whole-only` choose, and the notes the CLI prints on them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prtoggle.errors import RevertSpecError
from prtoggle.protocol import REVERT_ENV, RUN_REPORT_ENV
from prtoggle.recipes.prs import join_prs
from prtoggle.recipes.registry import Recipe, Registry, default_registry
from prtoggle.recipes.selection import RevertRequest, Selection, absent_note, left_out_note
from prtoggle.revert.partial import keep_whole, partial_note
from prtoggle.revert.partial import whole_only as whole_only_env
from prtoggle.revert.toggle import parse_revert_requests, select_reverts


@dataclass(frozen=True)
class RevertChoice:
    """What `-r` values chose: each request's selection, whether they said `all`, and the
    lines the CLI prints on stderr about it (what `all` left out)."""

    selections: tuple[Selection, ...]
    everything: bool
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class OuterRevert:
    """SGLANG_DEBUG_REVERT_PR as this command found it: the text kept in force in every run
    it makes (`spec`, None: none kept), its PRs, and the one line that says so (`note`)."""

    spec: str | None
    prs: tuple[int, ...]
    note: str | None


def outer_revert(environ: Mapping[str, str], *, command: str, registry: Registry) -> OuterRevert:
    """What `command` (`bisect`, `coverage`) does with a revert requested around it.

    Set by a prtoggle parent (an outer `prtoggle run`: its report directory is set), it is
    composed: kept in force in every run, and one note says so. Exported by hand, it is
    not kept (as `run` replaces it by `-r`), and one note says that. Never dropped silently.
    """
    value = environ.get(REVERT_ENV, "").strip()
    if value in ("", "0"):
        return OuterRevert(None, (), None)
    if not environ.get(RUN_REPORT_ENV):
        return OuterRevert(
            None,
            (),
            f"prtoggle {command}: {REVERT_ENV}={value!r} from the environment is not kept: "
            f"{command} chooses what each of its runs reverts (inside a prtoggle run the two "
            "would be composed)",
        )
    requests = parse_revert_requests(value, registry=registry, source=REVERT_ENV)
    prs = registry.prs() if requests is None else tuple(r.pr for r in requests)
    prs = tuple(dict.fromkeys(prs))
    return OuterRevert(
        value,
        prs,
        f"prtoggle {command}: {REVERT_ENV}={value!r} of the outer prtoggle run stays in force "
        f"in every run ({_prs_text(prs)} reverted throughout, never a candidate)",
    )


def load_default_registry(*, collection: str | None = None) -> Registry:
    """The shipped collections plus PRTOGGLE_YAML_PATH, restricted to `collection` if given.

    Raises RegistryError / UnknownPRError (an unknown collection lists the known ones);
    the command group prints them as one `error:` line.
    """
    return default_registry().in_collection(collection)


def parse_revert_options(
    values: Sequence[str], registry: Registry, *, option: str = "-r"
) -> tuple[RevertRequest, ...] | None:
    """Every `-r` value parsed like SGLANG_DEBUG_REVERT_PR, merged in order; None: `all`."""
    requests: list[RevertRequest] = []
    everything = False
    for value in values:
        parsed = parse_revert_requests(value, registry=registry, source=option)
        if parsed is None:
            everything = True
        else:
            requests.extend(request for request in parsed if request not in requests)
    return None if everything else tuple(requests)


def revert_selections(
    values: Sequence[str], registry: Registry, *, search_path: Sequence[str], option: str = "-r"
) -> RevertChoice:
    """The recipes the `-r` values use (the selection rule), and whether they said `all`.

    `all` keeps every recipe that applies to what is installed (its package found on
    this process's path or `search_path`) and notes, in one line, what it left out and
    why; a bare `N` leaves out the collections whose package is not importable (one
    note, where another collection's recipe is used); an explicit request none of whose
    recipes applies is an error.
    """
    requests = parse_revert_options(values, registry, option=option)
    if requests is not None:
        chosen = select_reverts(requests, registry=registry, search_path=search_path)
        absent = absent_note(chosen)
        notes = () if absent is None else (f"prtoggle: {option}: {absent}",)
        return RevertChoice(chosen, everything=False, notes=notes)
    selections = select_reverts(None, registry=registry, search_path=search_path)
    if not any(selection.recipes for selection in selections):
        note = left_out_note(selections)
        raise RevertSpecError(f"{option} all: no recipe applies here; {note or 'none registered'}")
    summary = _left_out_summary(selections)
    notes = () if summary is None else (f"prtoggle: {option} all: {summary}",)
    return RevertChoice(selections, everything=True, notes=notes)


def whole_selections(
    selections: Sequence[Selection], *, whole_only: bool, everything: bool, option: str = "-r"
) -> tuple[tuple[Selection, ...], tuple[str, ...]]:
    """The selections a `--whole-only` command keeps, and the notes that say every partial
    recipe used.

    An explicit request of a partial recipe is refused (a PrToggleError); `all` leaves
    partial recipes out, in one note. Each partial recipe kept gets one
    `prtoggle: PR N reverted in part (partial: ...)` note.
    """
    whole_only = whole_only or whole_only_env()
    kept, note = keep_whole(selections, whole_only=whole_only, everything=everything, source=option)
    notes = [] if note is None else [f"prtoggle: {option}: {note}"]
    for recipe in (r for s in kept for r in s.recipes if r.partial):
        notes.append(f"prtoggle: PR {recipe.pr} reverted in part ({partial_note([recipe])})")
    return kept, tuple(notes)


def qualified_specs(selections: Sequence[Selection]) -> tuple[str, ...]:
    """`C:N` for every chosen recipe: what a child is told to revert, exactly."""
    return tuple(dict.fromkeys(f"{r.collection}:{r.pr}" for s in selections for r in s.recipes))


def selected_recipes(registry: Registry, prs: Sequence[int]) -> list[Recipe]:
    """The fixes named by `prs`, in every collection (all fixes when empty); unknown: error."""
    if not prs:
        return list(registry.recipes)
    return [recipe for pr in dict.fromkeys(prs) for recipe in registry.find(pr)]


def _prs_text(prs: Sequence[int]) -> str:
    return f"PR{'s' if len(prs) > 1 else ''} {join_prs(prs)}"


def _left_out_summary(selections: Sequence[Selection], *, names: int = 6) -> str | None:
    """What `all` left out, by kind, the count and at most `names` recipes of each kind
    (`prtoggle list` gives each one's reason); None when nothing was."""
    by_kind: dict[str, list[str]] = {}
    for selection in selections:
        for item in selection.left_out:
            by_kind.setdefault(item.kind, []).append(item.recipe.label)
    if not by_kind:
        return None
    total = sum(len(labels) for labels in by_kind.values())
    parts = []
    for kind, labels in by_kind.items():
        shown = ", ".join(labels[:names])
        more = f" and {len(labels) - names} more" if len(labels) > names else ""
        parts.append(f"{len(labels)} {kind} ({shown}{more})")
    recipes = "1 recipe that does" if total == 1 else f"{total} recipes that do"
    return f"left out {recipes} not apply here: {'; '.join(parts)}; `prtoggle list` says why"

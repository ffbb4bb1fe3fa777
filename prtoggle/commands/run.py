"""`run`: the environment that reverts in COMMAND, the pre-check, and the run reports' verdict."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prtoggle.commands.selections import (
    load_default_registry,
    qualified_specs,
    revert_selections,
    whole_selections,
)
from prtoggle.errors import PatchApplicationError, RevertSpecError
from prtoggle.protocol import REVERT_ENV, RUN_REPORT_ENV, WHOLE_ONLY_ENV, shell_status
from prtoggle.recipes import parsed_recipes
from prtoggle.recipes.resolution import (
    checks_per_recipe,
    command_search_path,
    import_free_source_root,
)
from prtoggle.recipes.selection import Selection
from prtoggle.revert import child_report
from prtoggle.revert.partial import whole_only as whole_only_env
from prtoggle.revert.toggle import child_env
from prtoggle.runners.child_process import run_in_foreground
from prtoggle.runners.script_targets import script_targets


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: the status `run` exits with and the one line it says (or None)."""

    status: int
    line: str | None


def run_environment(
    reverts: Sequence[str],
    *,
    command: Sequence[str],
    notes: list[str],
    base: dict[str, str] | None = None,
    whole_only: bool = False,
) -> tuple[tuple[int, ...], dict[str, str]]:
    """The PRs `-r REVERTS` asks for and the environment `run` gives COMMAND (from `base`).

    Refuses (a PrToggleError) an empty `-r`, what does not apply to the code COMMAND would
    import, and with `whole_only` (or PRTOGGLE_WHOLE_ONLY=1 in `base`) a partial revert. A
    revert requested by a prtoggle parent (an outer `prtoggle run`, `bisect` or `coverage`:
    its report directory is set) is kept: composed. One exported by hand is replaced by
    `-r`, and a note says so. `notes` gets the lines to print on stderr as they arise, so
    that those said before a refusal are said too.
    """
    _refuse_empty(reverts)
    environ = os.environ if base is None else base
    registry = load_default_registry()
    search_path = command_search_path(command)
    requested = [*_outer_request(environ, notes=notes), *reverts]
    choice = revert_selections(requested, registry, search_path=search_path)
    notes.extend(choice.notes)
    whole_only = whole_only or whole_only_env(base)
    selections, whole_notes = whole_selections(
        choice.selections, whole_only=whole_only, everything=choice.everything
    )
    notes.extend(whole_notes)
    _refuse_reverts_that_do_not_apply(selections, command=command, search_path=search_path)
    specs = tuple(
        spec
        for selection in selections
        for spec in (
            qualified_specs([selection])
            if choice.everything or _left_out_absent(selection)
            else (selection.request.text,)
        )
    )
    prs = tuple(dict.fromkeys(s.request.pr for s in selections if s.recipes))
    env = child_env(specs, base=base)
    if whole_only:
        env[WHOLE_ONLY_ENV] = "1"
    return prs, env


def run_and_check_reports(
    prs: Sequence[int], *, command: Sequence[str], env: dict[str, str]
) -> RunOutcome:
    """Run COMMAND; its status and where the reverts were in force, or 78 and one line when
    they did not land in it."""
    with child_report.collecting_reports(env) as (reporting_env, directory):
        parsed_recipes.write(directory / parsed_recipes.PARSED_FILE)  # no YAML in each child
        status = shell_status(run_in_foreground(list(command), env=reporting_env))
        reports = child_report.read_reports(directory)
        outer = os.environ.get(RUN_REPORT_ENV)
        if outer:  # a run inside a run (or bisect, coverage): the outer one hears them too
            child_report.forward_reports(directory, to=Path(outer))
    outcome = child_report.verdict(prs, reports, command=command, status=status)
    return RunOutcome(outcome.status, outcome.line)


def _left_out_absent(selection: Selection) -> bool:
    """Whether a bare N left a collection out here (its package not importable): the
    children are then told exactly the recipes chosen (`C:N`), not N."""
    return any(item.kind == "absent" for item in selection.left_out)


def _outer_request(environ: Mapping[str, str], *, notes: list[str]) -> list[str]:
    """SGLANG_DEBUG_REVERT_PR as a prtoggle parent set it (kept), else [] (and if exported
    by hand, one note saying `-r` replaces it)."""
    outer = environ.get(REVERT_ENV, "").strip()
    if outer in ("", "0"):
        return []
    if environ.get(RUN_REPORT_ENV):
        return [outer]
    notes.append(
        f"prtoggle run: {REVERT_ENV}={outer!r} from the environment is replaced "
        "by -r (inside a prtoggle run, bisect or coverage the two would be composed)"
    )
    return []


def _refuse_empty(reverts: Sequence[str]) -> None:
    """`-r ""` (`-r "$PR"` with PR unset) or `-r 0` would run COMMAND unreverted: refused."""
    for value in reverts:
        if value.strip() in ("", "0"):
            raise RevertSpecError(
                f"-r {value!r} names no PR (an unset shell variable?); expected PR numbers "
                "(26521,24856), COLLECTION:PR (sglang:27460) or 'all'; to run COMMAND with "
                "nothing reverted, run it without prtoggle"
            )


def _refuse_reverts_that_do_not_apply(
    selections: Sequence[Selection], *, command: Sequence[str], search_path: Sequence[str]
) -> None:
    """Fail (status 2) before starting COMMAND when a chosen recipe is known not to apply.

    Which recipes a request uses is the selection rule's answer (a request none of whose
    recipes applies was refused already). Their target packages are looked for as files
    on this process's path, then in the working directory and the directory of a `.py`
    script in COMMAND (where a child Python finds them). Targets not found there are left
    to the child's start-up hook, which refuses them at import with status 78.
    A target in the script COMMAND runs as `__main__` is refused: no revert can land there.
    """
    recipes = [recipe for selection in selections for recipe in selection.recipes]
    inside = script_targets(recipes, command)
    if inside:
        raise PatchApplicationError(inside[0].reason)
    findable = [
        recipe
        for selection in selections
        for recipe in selection.recipes
        if import_free_source_root(recipe, search_path=search_path) is not None
    ]
    for recipe, checks in checks_per_recipe(findable, search_path=search_path).items():
        failed = [check for check in checks if check.failed]  # not-applicable: inert
        if failed:
            first = failed[0]
            raise PatchApplicationError(
                f"PR {recipe.pr} does not revert cleanly on the current code ({first.target}: "
                f"{first.message.splitlines()[0]}); `prtoggle check {recipe.pr} --collection "
                f"{recipe.collection}` shows the nearest matching lines"
            )

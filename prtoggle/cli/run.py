"""`prtoggle run`: run a command with fixes reverted, even if it never imports prtoggle."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import click

from prtoggle.cli.common import (
    examples_epilog,
    load_default_registry,
    qualified_specs,
    revert_selections,
    terminal_safe,
    whole_only_option,
    whole_selections,
)
from prtoggle.errors import PatchApplicationError, RevertSpecError
from prtoggle.protocol import (
    REVERT_ENV,
    RUN_NOT_REVERTED_EXIT_CODE,
    RUN_REPORT_ENV,
    WHOLE_ONLY_ENV,
    shell_status,
)
from prtoggle.recipes.resolution import (
    checks_per_fix,
    command_search_path,
    import_free_source_root,
)
from prtoggle.runners.script_targets import script_targets

if TYPE_CHECKING:
    from collections.abc import Sequence

    from prtoggle.recipes.selection import Selection

_RUN_EXIT_HELP = f"""\b
Exit status: COMMAND's (a signal N becomes 128+N); 2 when prtoggle refuses
before starting it (unknown PR, an empty -r, a revert that does not apply,
no such program); {RUN_NOT_REVERTED_EXIT_CODE} when a requested revert did not land: a child
Python's start-up hook refused it, a target was imported and never patched,
no Python process of COMMAND ran the hook at all (python -I/-E/-S, a wrapper
that sets its own PYTHONPATH), or a Python exec'd with -I/-E; one
`prtoggle run:` line says which (otherwise one line says where the reverts
were in force); a revert requested in the environment (an outer run) is kept;
129/130/143 when prtoggle itself gets SIGHUP/SIGINT/SIGTERM (COMMAND's group
is ended).

"""


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog=examples_epilog(
        "prtoggle run -r 26521 -- python app.py",
        "prtoggle run -r 26521,24856 -- pytest -q tests/",
        "prtoggle run -r all -- python -m fixes.scenarios.trtllm_draft_decode_capture",
        "prtoggle run --whole-only -r 24856 -- python examples/app.py",
        exit_status=_RUN_EXIT_HELP,
    ),
)
@click.option(
    "-r",
    "--revert",
    "reverts",
    multiple=True,
    required=True,
    metavar="SPEC",
    help="PRs to revert: `26521`, `26521,24856`, `sglang:27460` (one collection's recipe) "
    "or `all` (every recipe that applies here) (repeatable).",
)
@whole_only_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cli_command(reverts: tuple[str, ...], whole_only: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND with the given fixes reverted, even if it never imports prtoggle.

    The exit status is COMMAND's; a signal N becomes 128+N, as in a shell. A partial
    revert (a recipe with changes it does not revert) is said in one `prtoggle run:` line;
    --whole-only (or PRTOGGLE_WHOLE_ONLY=1) refuses it.
    """
    prs, env = run_environment(reverts, command=command, whole_only=whole_only)
    sys.stdout.flush()
    sys.exit(_run_and_check_reports(prs, command=command, env=env))


def run_environment(
    reverts: Sequence[str],
    *,
    command: Sequence[str],
    base: dict[str, str] | None = None,
    whole_only: bool = False,
) -> tuple[tuple[int, ...], dict[str, str]]:
    """The PRs `-r REVERTS` asks for and the environment `run` gives COMMAND (from `base`).

    Refuses (a PrToggleError) an empty `-r`, what does not apply to the code COMMAND would
    import, and with `whole_only` (or PRTOGGLE_WHOLE_ONLY=1 in `base`) a partial revert. A
    revert requested by a prtoggle parent (an outer `prtoggle run`, `bisect` or `coverage`:
    its report directory is set) is kept: composed. One exported by hand is replaced by
    `-r`, and a line says so.
    """
    from prtoggle.revert.partial import whole_only as whole_only_env
    from prtoggle.revert.toggle import child_env

    _refuse_empty(reverts)
    environ = os.environ if base is None else base
    registry = load_default_registry()
    search_path = command_search_path(command)
    requested = [*_outer_request(environ), *reverts]
    selections, everything = revert_selections(requested, registry, search_path=search_path)
    whole_only = whole_only or whole_only_env(base)
    selections = whole_selections(selections, whole_only=whole_only, everything=everything)
    _refuse_reverts_that_do_not_apply(selections, command=command, search_path=search_path)
    specs = (
        qualified_specs(selections)
        if everything
        else tuple(selection.request.text for selection in selections)
    )
    prs = tuple(dict.fromkeys(s.request.pr for s in selections if s.recipes))
    env = child_env(specs, base=base)
    if whole_only:
        env[WHOLE_ONLY_ENV] = "1"
    return prs, env


def _run_and_check_reports(
    prs: Sequence[int], *, command: Sequence[str], env: dict[str, str]
) -> int:
    """Run COMMAND; its status and where the reverts were in force, or 78 and one line when
    they did not land in it."""
    from prtoggle.revert import child_report
    from prtoggle.runners.child_process import run_in_foreground

    with child_report.collecting_reports(env) as (reporting_env, directory):
        status = shell_status(run_in_foreground(list(command), env=reporting_env))
        reports = child_report.read_reports(directory)
        outer = os.environ.get(RUN_REPORT_ENV)
        if outer:  # a run inside a run (or bisect, coverage): the outer one hears them too
            child_report.forward_reports(directory, to=Path(outer))
    outcome = child_report.verdict(prs, reports, command=command, status=status)
    if outcome.line is not None:
        click.echo(outcome.line, err=True)
    return outcome.status


def _outer_request(environ: Mapping[str, str]) -> list[str]:
    """SGLANG_DEBUG_REVERT_PR as a prtoggle parent set it (kept), else [] (and if exported
    by hand, one line saying `-r` replaces it)."""
    outer = environ.get(REVERT_ENV, "").strip()
    if outer in ("", "0"):
        return []
    if environ.get(RUN_REPORT_ENV):
        return [outer]
    click.echo(
        f"prtoggle run: {REVERT_ENV}={terminal_safe(outer)!r} from the environment is replaced "
        "by -r (inside a prtoggle run, bisect or coverage the two would be composed)",
        err=True,
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
    for recipe, checks in checks_per_fix(findable, search_path=search_path).items():
        failed = [check for check in checks if check.failed]  # not-applicable: inert
        if failed:
            first = failed[0]
            raise PatchApplicationError(
                f"PR {recipe.pr} does not revert cleanly on the current code ({first.target}: "
                f"{first.message.splitlines()[0]}); `prtoggle check {recipe.pr} --collection "
                f"{recipe.collection}` shows the nearest matching lines"
            )

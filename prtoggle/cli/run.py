"""`prtoggle run`: run a command with fixes reverted, even if it never imports prtoggle."""

from __future__ import annotations

import sys

import click

from prtoggle.cli.common import echo_notes, examples_epilog, whole_only_option
from prtoggle.commands.run import run_and_check_reports, run_environment
from prtoggle.protocol import RUN_NOT_REVERTED_EXIT_CODE

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
    notes: list[str] = []
    try:
        prs, env = run_environment(reverts, command=command, notes=notes, whole_only=whole_only)
    finally:
        echo_notes(notes)
    sys.stdout.flush()
    outcome = run_and_check_reports(prs, command=command, env=env)
    if outcome.line is not None:
        click.echo(outcome.line, err=True)
    sys.exit(outcome.status)

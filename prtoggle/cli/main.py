"""The `prtoggle` command line: list, show, check, run, repro, bisect and bench the fixes."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from prtoggle.cli.bench import bench_command
from prtoggle.cli.bisect import bisect_command
from prtoggle.cli.check import check_command
from prtoggle.cli.common import (
    EXIT_STATUS_HELP,
    PrToggleGroup,
    check_without_import,
    checks_per_fix,
    collection_option,
    echo_json,
    format_table,
    import_free_source_root,
    json_option,
    load_default_registry,
    parse_revert_options,
    refuse_absent_packages,
    selected_fixes,
)
from prtoggle.cli.coverage import coverage_command
from prtoggle.cli.import_sglang import import_sglang_command
from prtoggle.cli.repro import repro_command
from prtoggle.errors import PatchApplicationError
from prtoggle.protocol import BOOTSTRAP_FAILURE_EXIT_CODE, shell_status

if TYPE_CHECKING:
    from collections.abc import Sequence

    from prtoggle.recipes.check import TargetCheck
    from prtoggle.recipes.registry import Recipe, Registry

_RUN_EXIT_HELP = f"""\b
Exit status: COMMAND's (a signal N becomes 128+N); 2 when prtoggle refuses
before starting it (unknown PR, a revert that does not apply, no such
program); {BOOTSTRAP_FAILURE_EXIT_CODE} when a child Python's start-up hook cannot apply a revert
prtoggle could not check beforehand (its target package was not found);
130/143 when prtoggle itself is interrupted (COMMAND's group is ended).

"""

CAPTURE_NOTE = (
    "acts at CUDA graph capture: revert before capture; a graph captured with the fix keeps it"
)

_MAIN_EPILOG = """\b
Exit status: 0 yes/success; 1 the command ran and its answer is no (a check
failed, a fix did not reproduce, bisect found no culprit); 2 bad input or a
prtoggle error, printed as one `error: ...` line (usage errors too); 130/143
interrupted by SIGINT/SIGTERM (child processes ended). `run` passes its
command's status through.

\b
Examples:
  prtoggle list
  prtoggle show 26521
  prtoggle run -r 26521 -- python app.py
  prtoggle repro --all
  prtoggle bisect -- pytest -q tests/regression/test_pr26521_draft_decode_capture.py
  prtoggle bench --all
"""


@click.group(cls=PrToggleGroup, epilog=_MAIN_EPILOG)
@click.version_option(package_name="prtoggle")
def cli() -> None:
    """Revert historical bug fixes at run time and reproduce the failures they prevented."""


@cli.command(
    "list",
    epilog=EXIT_STATUS_HELP
    + "\b\nExamples:\n  prtoggle list\n  prtoggle list --collection fixes --json",
)
@collection_option
@json_option
def list_command(collection: str | None, as_json: bool) -> None:
    """List the registered fixes of every collection and whether each revert applies.

    The sources are read as files: nothing is imported (torch neither). APPLIES is
    `absent` when the fix's package is not installed here.
    """
    registry = load_default_registry(collection=collection)
    fixes = selected_fixes(registry, ())
    checks = checks_per_fix(registry, fixes)
    records = [_list_record(fix, checks[fix]) for fix in fixes]
    if as_json:
        echo_json(records)
        return
    applies = {True: "yes", False: "NO", None: "absent"}
    rows = [
        [
            str(r["pr"]),
            r["collection"],
            r["merged"] or "-",
            r["component"] or "-",
            r["symptom"] or "-",
            applies[r["applies"]],
            r["title"] or "-",
        ]
        for r in records
    ]
    headers = ["PR", "COLLECTION", "MERGED", "COMPONENT", "SYMPTOM", "APPLIES", "TITLE"]
    click.echo(format_table(headers, rows))


@cli.command(
    "show",
    epilog=EXIT_STATUS_HELP
    + "\b\nExamples:\n  prtoggle show 21649 --collection sglang\n"
    + "  prtoggle show 27460 --collection fixes --json",
)
@click.argument("pr", type=int)
@collection_option
@json_option
def show_command(pr: int, collection: str | None, as_json: bool) -> None:
    """Show fix PR: its metadata and a unified diff, fixed -> reverted, per target.

    A PR number registered in several collections needs --collection (the error lists them).
    """
    from prtoggle.recipes.check import fix_diffs

    fix = load_default_registry(collection=collection).get(pr)
    try:
        refuse_absent_packages(fix)
        diffs = fix_diffs(fix, source_root=import_free_source_root(fix))
    except PatchApplicationError:
        if not as_json:  # the metadata still helps; the error line follows
            _print_metadata(fix)
        raise
    if as_json:
        record = _fix_metadata(fix)
        record["diffs"] = [
            {
                "target": diff.target,
                "filename": diff.filename,
                "first_line": diff.first_line,
                "diff": diff.unified_diff(),
            }
            for diff in diffs
        ]
        echo_json(record)
        return
    _print_metadata(fix)
    for diff in diffs:
        click.echo("")
        click.echo(diff.unified_diff().rstrip("\n"))


@cli.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog=_RUN_EXIT_HELP + "\b\nExamples:\n  prtoggle run -r 26521 -- python app.py"
    "\n  prtoggle run -r 26521,24856 -- pytest -q tests/"
    "\n  prtoggle run -r all -- python -m fixes.scenarios.trtllm_draft_decode_capture",
)
@click.option(
    "-r",
    "--revert",
    "reverts",
    multiple=True,
    required=True,
    metavar="SPEC",
    help="PRs to revert: `26521`, `26521,24856` or `all` (repeatable).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cli_command(reverts: tuple[str, ...], command: tuple[str, ...]) -> None:
    """Run COMMAND with the given fixes reverted, even if it never imports prtoggle.

    The exit status is COMMAND's; a signal N becomes 128+N, as in a shell.
    """
    from prtoggle.revert.toggle import child_env
    from prtoggle.runners.child_process import run_in_foreground

    registry = load_default_registry()
    prs = parse_revert_options(reverts, registry)
    _refuse_reverts_that_do_not_apply(registry, prs, command=command)
    sys.stdout.flush()
    sys.exit(shell_status(run_in_foreground(list(command), env=child_env(prs))))


cli.add_command(check_command)
cli.add_command(repro_command)
cli.add_command(bisect_command)
cli.add_command(bench_command)
cli.add_command(coverage_command)
cli.add_command(import_sglang_command)


def main() -> None:
    """Console entry point (`prtoggle`, `python -m prtoggle`)."""
    cli(prog_name="prtoggle")


def _refuse_reverts_that_do_not_apply(
    registry: Registry, prs: Sequence[int], *, command: Sequence[str]
) -> None:
    """Fail (status 2) before starting COMMAND when a revert is known not to apply.

    The target packages are looked for as files on this process's path, then in the
    working directory and the directory of a `.py` script in COMMAND (where a child Python
    finds them). Targets not found there are left to the child's start-up hook, which
    refuses them at import with status 78.
    """
    search_path = _child_search_path(command)
    findable = [
        fix
        for pr in prs
        for fix in registry.find(pr)
        if import_free_source_root(fix, search_path=search_path) is not None
    ]
    for pr, checks in check_without_import(registry, findable, search_path=search_path).items():
        failed = [check for check in checks if check.failed]  # not-applicable: inert
        if failed:
            first = failed[0]
            raise PatchApplicationError(
                f"PR {pr} does not revert cleanly on the current code ({first.target}: "
                f"{first.message.splitlines()[0]}); `prtoggle check {pr}` shows the nearest "
                "matching lines"
            )


def _child_search_path(command: Sequence[str]) -> list[str]:
    """Where a child Python of COMMAND may find modules beyond this process's sys.path."""
    scripts = [str(Path(arg).resolve().parent) for arg in command[1:] if arg.endswith(".py")]
    return list(dict.fromkeys([os.getcwd(), *scripts]))


def _print_metadata(fix: Recipe) -> None:
    click.echo(f"PR {fix.pr}: {fix.title or '(untitled)'}")
    for key, value in _fix_metadata(fix).items():
        if key not in ("pr", "title", "acts_at_capture", "targets") and value is not None:
            click.echo(f"  {(key + ':').ljust(10)} {value}")
    click.echo(f"  targets:   {', '.join(patch.target for patch in fix.patches)}")
    if fix.acts_at_capture:
        click.echo(f"  note:      {CAPTURE_NOTE}")


def _fix_metadata(fix: Recipe) -> dict[str, Any]:
    return {
        "pr": fix.pr,
        "collection": fix.collection,
        "title": fix.title,
        "url": fix.url,
        "merged": fix.merged.isoformat() if fix.merged else None,
        "component": fix.component,
        "symptom": fix.symptom,
        "expect": fix.expect,
        "repro": fix.repro,
        "bench": fix.bench,
        "file": str(fix.path),
        "acts_at_capture": fix.acts_at_capture,
        "targets": [patch.target for patch in fix.patches],
    }


def _list_record(fix: Recipe, checks: list[TargetCheck]) -> dict[str, Any]:
    """`applies` is None when the fix's package is not installed (absent)."""
    record = _fix_metadata(fix)
    absent = import_free_source_root(fix) is None
    record["applies"] = None if absent else all(check.ok for check in checks)
    record["problems"] = [f"{check.target}: {check.message}" for check in checks if not check.ok]
    return record

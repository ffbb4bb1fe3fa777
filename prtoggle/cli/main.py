"""The `prtoggle` command group: one module per command in prtoggle.cli, joined here."""

from __future__ import annotations

import click

from prtoggle.cli.bench import bench_command
from prtoggle.cli.bisect import bisect_command
from prtoggle.cli.check import check_command
from prtoggle.cli.common import PrToggleGroup
from prtoggle.cli.coverage import coverage_command
from prtoggle.cli.import_sglang import import_sglang_command
from prtoggle.cli.list import list_command
from prtoggle.cli.new import new_command
from prtoggle.cli.rebase import rebase_command
from prtoggle.cli.repro import repro_command
from prtoggle.cli.run import run_cli_command
from prtoggle.cli.show import show_command

_MAIN_EPILOG = """\b
Exit status: 0 yes/success; 1 the command ran and its answer is no (a check
failed, a fix did not reproduce, bisect found no culprit); 2 bad input or a
prtoggle error, printed as one `error: ...` line (usage errors too); 129/130/143
interrupted by SIGHUP/SIGINT/SIGTERM (child processes ended). `run` passes its
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


for _command in (
    list_command,
    show_command,
    check_command,
    run_cli_command,
    repro_command,
    bisect_command,
    bench_command,
    coverage_command,
    import_sglang_command,
    new_command,
    rebase_command,
):
    cli.add_command(_command)


def main() -> None:
    """Console entry point (`prtoggle`, `python -m prtoggle`)."""
    cli(prog_name="prtoggle")

"""The `prtoggle` command group: one module per command in prtoggle.cli, loaded when used."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import click

from prtoggle.cli.common import PrToggleGroup
from prtoggle.recipes.demo_engine import make_importable


@dataclass(frozen=True)
class CommandEntry:
    """Where a command lives (module, attribute) and its help's first paragraph (`summary`),
    which `prtoggle --help` shows without importing the module."""

    module: str
    attribute: str
    summary: str


COMMANDS: dict[str, CommandEntry] = {
    "list": CommandEntry(
        "prtoggle.cli.list",
        "list_command",
        "List the registered fixes of every collection and whether each revert applies.",
    ),
    "show": CommandEntry(
        "prtoggle.cli.show",
        "show_command",
        "Show fix PR: every collection's recipe of it, metadata and a diff fixed -> reverted.",
    ),
    "check": CommandEntry(
        "prtoggle.cli.check",
        "check_command",
        "Check that every revert of the given PRs (default: all) applies cleanly.",
    ),
    "run": CommandEntry(
        "prtoggle.cli.run",
        "run_cli_command",
        "Run COMMAND with the given fixes reverted, even if it never imports prtoggle.",
    ),
    "repro": CommandEntry(
        "prtoggle.cli.repro",
        "repro_command",
        "Reproduce the failure each fix prevented: fixed it passes, reverted it fails.",
    ),
    "bisect": CommandEntry(
        "prtoggle.cli.bisect",
        "bisect_command",
        "Find which fix(es) COMMAND needs: run it with sets of fixes reverted.",
    ),
    "bench": CommandEntry(
        "prtoggle.cli.bench",
        "bench_command",
        "Time each fix's code path fixed and reverted, side by side; print the ratios.",
    ),
    "coverage": CommandEntry(
        "prtoggle.cli.coverage",
        "coverage_command",
        "Run a pytest suite plain and once per fix reverted: which tests guard which fix.",
    ),
    "import-sglang": CommandEntry(
        "prtoggle.cli.import_sglang",
        "import_sglang_command",
        "Write sglang's own revert recipes (pr_fix_toggle.py) as prtoggle recipe files.",
    ),
    "new": CommandEntry(
        "prtoggle.cli.new",
        "new_command",
        "Write a revert recipe drafted from a fix: its diff (--from-diff) or commit (--from-git).",
    ),
    "rebase": CommandEntry(
        "prtoggle.cli.rebase",
        "rebase_command",
        "Propose recipe PR updated for code it no longer applies to (moved, drifted).",
    ),
}
"""Every command of the group, by name: loaded only when it runs or its own help is asked
for (tests/prtoggle/cli/test_cli_main.py checks each summary against the command's help)."""


class LazyGroup(PrToggleGroup):
    """The prtoggle group, importing a command's module only when that command is used.

    `prtoggle --help` lists every command from COMMANDS' summaries, shortened as click
    shortens a command's help, so its output is the one an eagerly built group prints.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, self._short_help(ctx, name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _short_help(self, ctx: click.Context, name: str, limit: int) -> str:
        if name in self.commands or name not in COMMANDS:
            command = self.get_command(ctx, name)
            return "" if command is None else command.get_short_help_str(limit)
        # As the loaded command would say it (click's public API, whatever its version).
        stand_in = click.Command(name, help=COMMANDS[name].summary)
        return stand_in.get_short_help_str(limit)


def load_command(name: str) -> click.Command:
    """The click command `name` of COMMANDS, its module imported now."""
    entry = COMMANDS[name]
    command = getattr(importlib.import_module(entry.module), entry.attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{entry.module}.{entry.attribute} is not a click command")
    return command


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


@click.group(cls=LazyGroup, epilog=_MAIN_EPILOG)
@click.version_option(package_name="prtoggle")
def cli() -> None:
    """Revert historical bug fixes at run time and reproduce the failures they prevented."""


def main() -> None:
    """Console entry point (`prtoggle`, `python -m prtoggle`)."""
    make_importable()  # the checkout's demo engine, when run from prtoggle's checkout
    cli(prog_name="prtoggle")

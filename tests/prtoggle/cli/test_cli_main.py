"""The command group: commands loaded when used, `prtoggle --help` as an eager group prints it."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from prtoggle.cli.common import PrToggleGroup
from prtoggle.cli.main import COMMANDS, cli, load_command

IMPORTED_COMMAND_MODULES = """\
import sys
from prtoggle.cli.main import COMMANDS, main
sys.argv = ['prtoggle', *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
loaded = sorted(e.module for e in COMMANDS.values() if e.module in sys.modules)
print('loaded:', ' '.join(loaded), file=sys.stderr)
"""


def loaded_command_modules(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", IMPORTED_COMMAND_MODULES, *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stderr.splitlines()[-1]


def test_prtoggle_help_imports_no_command_module() -> None:
    assert loaded_command_modules("--help") == "loaded: "


def test_a_command_imports_its_own_module_and_not_the_others() -> None:
    assert loaded_command_modules("rebase", "--help") == "loaded: prtoggle.cli.rebase"


def test_an_unknown_command_imports_no_command_module() -> None:
    assert loaded_command_modules("nosuch") == "loaded: "


def eager_group() -> click.Group:
    """The group as it was built before lazy loading: every command added up front."""
    commands = {name: load_command(name) for name in COMMANDS}
    return PrToggleGroup(
        name=cli.name,
        commands=commands,
        params=cli.params,
        help=cli.help,
        epilog=cli.epilog,
        callback=cli.callback,
    )


@pytest.mark.parametrize("width", [40, 80, 120])
def test_help_is_the_help_of_the_group_with_every_command_loaded(width: int) -> None:
    runner = CliRunner()
    lazy = runner.invoke(cli, ["--help"], prog_name="prtoggle", terminal_width=width)
    eager = runner.invoke(eager_group(), ["--help"], prog_name="prtoggle", terminal_width=width)
    assert lazy.exit_code == eager.exit_code == 0
    assert lazy.output == eager.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_summary_is_the_first_paragraph_of_the_command_help(name: str) -> None:
    command = load_command(name)
    assert command.name == name
    assert command.help is not None
    assert " ".join(command.help.split("\n\n")[0].split()) == COMMANDS[name].summary

"""The command group: commands loaded when used, help, one-line errors, no torch at start-up."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from cli_fakes import FakeProject, fake_project, invoke
from click.testing import CliRunner

from prtoggle.cli.common import PrToggleGroup
from prtoggle.cli.main import COMMANDS, cli, load_command

__all__ = ["fake_project"]  # the fixture, imported for pytest

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


def test_an_unknown_option_is_one_error_line_not_click_usage_text(
    fake_project: FakeProject,
) -> None:
    result = invoke("list", "--bogus")
    assert (result.exit_code, result.stdout, result.stderr) == (
        2,
        "",
        "error: No such option '--bogus' (see `prtoggle list --help`)\n",
    )


def test_an_unknown_command_names_the_commands() -> None:
    result = invoke("lsit")
    assert (result.exit_code, result.stderr) == (
        2,
        "error: no command 'lsit': expected one of bench, bisect, check, coverage, "
        "import-sglang, list, new, rebase, repro, run, show (see `prtoggle --help`)\n",
    )


def test_python_dash_m_prtoggle_help_lists_the_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "prtoggle", "--help"], capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith("Usage: prtoggle [OPTIONS] COMMAND [ARGS]...")
    for command in ("bisect", "check", "list", "repro", "run", "show"):
        assert f"\n  {command} " in result.stdout


@pytest.mark.parametrize("command", ["list", "show", "check", "run", "repro", "bisect", "bench"])
def test_every_command_has_help_with_examples(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert f"  Examples:\n    prtoggle {command}" in result.output


def test_the_examples_of_show_and_list_run_on_the_shipped_recipes() -> None:
    for command in ("show", "list"):
        examples = invoke(command, "--help").output.split("Examples:\n", 1)[1].splitlines()
        for line in filter(None, (example.strip() for example in examples)):
            result = invoke(*line.split()[1:])
            assert result.exit_code == 0, f"{line}: {result.output}"


def test_importing_the_cli_does_not_import_torch() -> None:
    code = "import prtoggle.cli.main, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "argv", [["list"], ["show", "--collection", "fixes", "26521"], ["list", "--json"]]
)
def test_listing_commands_do_not_import_torch(argv: list[str]) -> None:
    code = (
        f"import sys\nfrom prtoggle.cli.main import main\nsys.argv = ['prtoggle', *{argv!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    status = exc.code\n"
        "assert status in (0, None), status\nassert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_a_broken_registry_is_a_one_line_error(fake_project: FakeProject) -> None:
    (fake_project.registry_dir / "bad.yaml").write_text("pr: [unclosed\n")
    result = invoke("list")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {fake_project.registry_dir / 'bad.yaml'}:")
    assert "Traceback" not in result.output


def test_bare_prtoggle_prints_its_usage_not_an_error_line() -> None:
    result = invoke()
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: prtoggle [OPTIONS] COMMAND [ARGS]...\n\n")
    assert "\nCommands:\n  bench " in result.stderr
    assert result.stdout == ""


def test_every_commands_help_keeps_its_examples_as_written_and_shows_no_escaped_marker() -> None:
    for name in COMMANDS:
        result = subprocess.run(
            [sys.executable, "-m", "prtoggle", name, "--help"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (result.returncode, result.stderr) == (0, ""), name
        lines = result.stdout.splitlines()
        assert "\\x08" not in result.stdout, name
        assert lines[lines.index("  Examples:") - 1] == "", name
        assert max(len(line) for line in lines) <= 100, name

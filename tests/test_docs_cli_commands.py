"""docs/cli.md's generated command list is the one the click group gives today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from prtoggle.cli.main import COMMANDS

ROOT = Path(__file__).resolve().parent.parent


def test_the_committed_command_list_matches_the_commands_and_their_help() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "cli_commands.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")


def test_every_command_has_a_row_with_a_reference() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    for name in COMMANDS:
        row = next(line for line in page.splitlines() if line.startswith(f"| `{name}` |"))
        assert row.endswith(") |") and "(none)" not in row, row

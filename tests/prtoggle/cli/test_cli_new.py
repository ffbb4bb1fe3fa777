"""Tests for `prtoggle new`: how its options are checked before any diff is read.

Drafting from a diff or a commit, through the command: tests/prtoggle/recipes/
test_new_from_diff.py and test_new_realfixes.py; writing the file: commands/test_new_files.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from prtoggle.cli.main import cli

SEE_HELP = " (see `prtoggle new --help`)\n"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["new", *args], prog_name="prtoggle")


@pytest.mark.parametrize(
    "args", [[], ["--from-diff", "fix.diff", "--from-git", "HEAD"]], ids=["neither", "both"]
)
def test_exactly_one_source_of_the_fix_is_asked_for(args: list[str]) -> None:
    result = invoke(*args)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: give one of --from-diff FILE or --from-git REV" + SEE_HELP


def test_a_diff_file_that_cannot_be_read_names_the_file_and_what_was_expected(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nope.diff"
    result = invoke("--from-diff", str(missing), "--pr", "5", "--out", str(tmp_path))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: Invalid value for '--from-diff': cannot read {missing}: [Errno 2] No such "
        f"file or directory: '{missing}'; expected a unified diff file or - for stdin" + SEE_HELP
    )
    assert list(tmp_path.iterdir()) == []

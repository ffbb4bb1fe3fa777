"""`prtoggle bisect --git`'s options: what goes only with --git, and what never does."""

from __future__ import annotations

import pytest

from tests.prtoggle.cli_fakes import invoke


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--repeat", "3"],
            "error: --repeat needs --git A..B (a range of commits to bisect)",
        ),
        (
            ["--fingerprint", "x", "--cache", "/tmp/c"],
            "error: --fingerprint, --cache need --git A..B (a range of commits to bisect)",
        ),
        (
            ["--git", "HEAD~2..HEAD", "-r", "24856"],
            "error: -r cannot be used with --git: --git bisects commits of a range, "
            "-r/--metric/--whole-only bisect fixes of the recipe collections",
        ),
        (
            ["--git", "HEAD~2..HEAD", "--mode", "ddmin"],
            "error: --mode ddmin does not take --git; expected ordered or attribute",
        ),
        (
            ["--git", "HEAD~2..HEAD", "--fingerprint", "("],
            "error: Invalid value for --fingerprint: '(' is not a regular expression: "
            "missing ), unterminated subpattern at position 0",
        ),
    ],
)
def test_history_options_are_checked_before_anything_runs(args: list[str], line: str) -> None:
    result = invoke("bisect", *args, "--", "python", "-c", "pass")
    assert result.exit_code == 2
    assert result.output.splitlines() == [f"{line} (see `prtoggle bisect --help`)"]


def test_a_range_that_is_not_a_to_b_is_one_error_line_exit_2() -> None:
    result = invoke("bisect", "--git", "HEAD", "--", "python", "-c", "pass")
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "error: --git 'HEAD': expected a range A..B (two commits of the repository, "
        "e.g. v0.5.16..v0.5.17 or 8905cbd42f..HEAD) (see `prtoggle bisect --help`)"
    ]

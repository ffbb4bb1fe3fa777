"""One exit-status scheme for every command, checked on real `prtoggle` processes.

0 yes/success; 1 the answer is no; 2 bad input, as one `error: ...` line (click usage
errors too); 130/143 interrupted (tests/reliability/test_signals.py); `run` passes its
command's status through and reports its own failures as 2 before the command starts.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from processes import SleepingProject, without_in_force_lines

import prtoggle.cli.common


def prtoggle_cli(project: SleepingProject, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prtoggle", *args],
        env=project.env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("repro", "--jobz", "2"),
            "error: No such option '--jobz'. (Did you mean one of: '--jobs', '--json'?) "
            "(see `prtoggle repro --help`)",
        ),
        (("bisect",), "error: Missing argument 'COMMAND...' (see `prtoggle bisect --help`)"),
        (
            ("bench", "--repeat", "zero", "91001"),
            "error: Invalid value for '--repeat': 'zero' is not a valid integer "
            "range (see `prtoggle bench --help`)",
        ),
        (
            ("repro", "91001", "--provider", "tritno"),
            "error: Invalid value for '--provider': 'tritno' is not one of 'torch', 'triton', "
            "'flashinfer' (see `prtoggle repro --help`)",
        ),
    ],
)
def test_a_usage_error_is_one_error_line_and_status_2(
    sleeping_project: SleepingProject, args: tuple[str, ...], line: str
) -> None:
    result = prtoggle_cli(sleeping_project, *args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", line + "\n")
    assert sleeping_project.started_children() == 0


def test_an_unknown_pr_is_one_error_line_and_status_2(sleeping_project: SleepingProject) -> None:
    result = prtoggle_cli(sleeping_project, "repro", "5")
    assert result.returncode == 2
    assert result.stderr.startswith("error: PR 5 is not registered; registered PRs: ")
    assert result.stderr.count("\n") == 1


def test_repro_on_cuda_without_cuda_is_refused_before_any_child_starts(
    sleeping_project: SleepingProject,
) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = prtoggle_cli(sleeping_project, "repro", "91001", "--device", "cuda", "--timeout", "5")
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        f"error: Invalid value for '--device': 'cuda' requested but torch {torch.__version__} "
        "sees no CUDA device; expected cpu on this machine (see `prtoggle repro --help`)\n",
    )
    assert sleeping_project.started_children() == 0


@pytest.mark.parametrize("status", [0, 1, 3, 125])
def test_run_passes_its_commands_status_through(
    sleeping_project: SleepingProject, status: int
) -> None:
    code = f"import sys; sys.exit({status})"
    result = prtoggle_cli(sleeping_project, "run", "-r", "91001", "--", sys.executable, "-c", code)
    assert (result.returncode, without_in_force_lines(result.stderr)) == (status, "")


def test_run_reports_a_command_killed_by_a_signal_as_128_plus_n(
    sleeping_project: SleepingProject,
) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"
    result = prtoggle_cli(sleeping_project, "run", "-r", "91001", "--", sys.executable, "-c", code)
    assert (result.returncode, without_in_force_lines(result.stderr)) == (128 + 6, "")


def test_run_refuses_a_missing_program_with_status_2(sleeping_project: SleepingProject) -> None:
    result = prtoggle_cli(sleeping_project, "run", "-r", "91001", "--", "no-such-program-xyz")
    assert (result.returncode, result.stderr) == (
        2,
        "error: cannot run 'no-such-program-xyz': No such file or directory\n",
    )


def test_the_documented_scheme_is_in_every_commands_help() -> None:
    for command in ("list", "show", "check", "repro", "bench", "run"):
        result = subprocess.run(
            [sys.executable, "-m", "prtoggle", command, "--help"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "130/143" in result.stdout, command
    assert "130/143" in prtoggle.cli.common.EXIT_STATUS_HELP

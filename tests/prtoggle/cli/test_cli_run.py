"""Tests for `prtoggle run`: refusals before starting, exit statuses, reverts in children."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_fakes import (
    ANSWER_FIX,
    BROKEN_FIX,
    FIRST_HALF_FIX,
    HARMLESS_FIX,
    REGISTERED,
    SECOND_HALF_FIX,
    TARGET_MODULE,
    FakeProject,
    fake_project,
    invoke,
    python_command,
)

__all__ = ["fake_project"]  # the fixture, imported for pytest


def test_run_rejects_an_unknown_pr_before_starting(fake_project: FakeProject) -> None:
    result = invoke("run", "-r", "777", "--", "true")
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: -r='777': PR 777 is not registered; registered PRs: {REGISTERED}\n"
    )


def test_run_rejects_a_malformed_spec(fake_project: FakeProject) -> None:
    result = invoke("run", "-r", "12x", "--", "true")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: -r='12x': '12x' is not a PR number; expected PR numbers or COLLECTION:PR "
        "(e.g. sglang:27460) separated by commas or spaces, or 'all'; "
        f"registered PRs: {REGISTERED}\n"
    )


def test_run_refuses_a_revert_that_does_not_apply_before_starting(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    result = invoke("run", "-r", str(BROKEN_FIX), "--", "touch", str(marker))
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: PR {BROKEN_FIX} does not revert cleanly on the current code "
        f"({TARGET_MODULE}.answer: {TARGET_MODULE}.answer: edit 1 of 1 ("
    )
    assert result.stderr.endswith(
        f"expected exactly 1.); `prtoggle check {BROKEN_FIX} --collection registry` shows "
        "the nearest matching lines\n"
    )
    assert result.stderr.count("\n") == 1
    assert not marker.exists()


def test_run_names_a_missing_program(fake_project: FakeProject) -> None:
    result = invoke("run", "-r", str(ANSWER_FIX), "--", "no-such-program-xyz")
    assert result.exit_code == 2
    assert result.stderr == ("error: cannot run 'no-such-program-xyz': No such file or directory\n")


def test_run_requires_a_command(fake_project: FakeProject) -> None:
    result = invoke("run", "-r", str(ANSWER_FIX))
    assert (result.exit_code, result.stderr) == (
        2,
        "error: Missing argument 'COMMAND...' (see `prtoggle run --help`)\n",
    )


def test_run_checks_targets_found_in_the_working_directory_before_starting(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    # The target module is only in the working directory, where `python -c` finds it.
    marker = tmp_path / "started"
    env = {**fake_project.env(), "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    code = f"import {TARGET_MODULE}; open({str(marker)!r}, 'w').close()"
    # -P: this prtoggle does not have its working directory on sys.path either
    prtoggle_run = [sys.executable, "-P", "-m", "prtoggle", "run", "-r", str(BROKEN_FIX), "--"]
    result = subprocess.run(
        [*prtoggle_run, sys.executable, "-c", code],
        env=env,
        cwd=fake_project.source_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stderr.count("\n")) == (2, 1), result.stderr
    assert result.stderr.startswith(
        f"error: PR {BROKEN_FIX} does not revert cleanly on the current code ({TARGET_MODULE}."
    )
    assert not marker.exists()


@pytest.mark.parametrize("status", [0, 3, 125])
def test_run_passes_the_exit_status_through(fake_project: FakeProject, status: int) -> None:
    command = python_command(f"import sys; sys.exit({status})")
    assert invoke("run", "-r", str(ANSWER_FIX), "--", *command).exit_code == status


def test_run_reports_a_signal_as_128_plus_its_number(fake_project: FakeProject) -> None:
    command = python_command("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert invoke("run", "-r", str(ANSWER_FIX), "--", *command).exit_code == 128 + 15


def test_run_reverts_in_a_child_that_never_imports_prtoggle(fake_project: FakeProject) -> None:
    code = f"import {TARGET_MODULE} as m, sys; sys.exit(m.answer())"
    fixed = subprocess.run(python_command(code), env=fake_project.env(), check=False)
    assert fixed.returncode == 42
    reverted = subprocess.run(
        ["prtoggle", "run", "-r", f"{ANSWER_FIX},{FIRST_HALF_FIX}", "--", *python_command(code)],
        env=fake_project.env(),
        check=False,
    )
    assert reverted.returncode == 41


def test_run_accepts_repeated_r_options_and_command_options(fake_project: FakeProject) -> None:
    code = (
        f"import {TARGET_MODULE} as m, sys; sys.exit(m.answer() + m.first_half() + m.second_half())"
    )
    result = subprocess.run(
        [
            "prtoggle",
            "run",
            "-r",
            str(ANSWER_FIX),
            "-r",
            str(SECOND_HALF_FIX),
            *python_command(code),
        ],
        env=fake_project.env(),
        check=False,
    )
    assert result.returncode == 41 + 21 + 0


def test_run_refuses_a_revert_outside_its_range_before_starting_the_program(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    """A recipe for other versions does not take part: the request is refused, exit 2."""
    path = fake_project.registry_dir / "90013.yaml"
    path.write_text(
        f"applies_to: prtoggle-fake>=1.0,<2.0\npatches:\n  - target: {TARGET_MODULE}.answer\n"
        "    edits:\n      - match: value = 42\n        replacement: value = 41\n"
    )
    dist_info = fake_project.source_dir / "prtoggle_fake-2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Name: prtoggle-fake\nVersion: 2.3\n")
    marker = tmp_path / "started"
    refused = subprocess.run(
        ["prtoggle", "run", "-r", "90013", "--", *python_command(f"open({str(marker)!r}, 'w')")],
        env=fake_project.env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert (refused.returncode, refused.stderr, marker.exists()) == (
        2,
        "error: 90013: no recipe applies to the installed code: registry/90013 is out of "
        "range: installed prtoggle-fake 2.3, range prtoggle-fake>=1.0,<2.0; use a recipe for "
        "the installed version or install a version in that range\n",
        False,
    )


def test_run_of_pytest_gives_no_assert_rewrite_warning_for_prtoggle(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    (tmp_path / "test_answer.py").write_text(
        f"import {TARGET_MODULE} as m\n\ndef test_answer():\n    assert m.answer() == 41\n"
    )
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    result = subprocess.run(
        ["prtoggle", "run", "-r", str(ANSWER_FIX), "--", *pytest_argv, "test_answer.py"],
        env=fake_project.env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout
    assert "PytestAssertRewriteWarning" not in result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("1 passed in ")


def test_run_all_keeps_what_applies_and_names_what_it_left_out_in_one_line(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    (fake_project.registry_dir / "90013.yaml").write_text(
        f"applies_to: prtoggle-fake>=1.0,<2.0\npatches:\n  - target: {TARGET_MODULE}.answer\n"
        "    edits:\n      - match: value = 42\n        replacement: value = 41\n"
    )
    dist_info = fake_project.source_dir / "prtoggle_fake-2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Name: prtoggle-fake\nVersion: 2.3\n")
    for pr in (BROKEN_FIX, HARMLESS_FIX):  # keep one revert per target, all applying
        (fake_project.registry_dir / f"{pr}.yaml").unlink()
    seen = tmp_path / "seen"
    code = f"import os; open({str(seen)!r}, 'w').write(os.environ['SGLANG_DEBUG_REVERT_PR'])"
    result = invoke("run", "-r", "all", "--", *python_command(code))
    assert (result.exit_code, result.stderr) == (
        0,
        "prtoggle: -r all: left out 1 recipe that does not apply here: 1 out-of-range "
        "(registry/90013); `prtoggle list` says why\n"
        f"prtoggle run: PRs {ANSWER_FIX}, {FIRST_HALF_FIX}, {SECOND_HALF_FIX} requested in 1 "
        "process, but no process imported its code, so nothing was reverted (registry/"
        f"{ANSWER_FIX}, registry/{FIRST_HALF_FIX}, registry/{SECOND_HALF_FIX})\n",
    )
    assert seen.read_text() == (
        f"registry:{ANSWER_FIX},registry:{FIRST_HALF_FIX},registry:{SECOND_HALF_FIX}"
    )


def test_zero_in_the_variable_means_no_revert_as_in_sglang(fake_project: FakeProject) -> None:
    code = (
        f"import prtoggle, {TARGET_MODULE} as m; print(prtoggle.maybe_revert_pr_fix(), m.answer())"
    )
    result = subprocess.run(
        python_command(code),
        env={**fake_project.env(), "SGLANG_DEBUG_REVERT_PR": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "() 42\n", "")

"""A program `prtoggle run` was asked to revert never runs unreverted without a word (issue 19.1).

Real `prtoggle run` processes on real files: children that never load the start-up hook
(`python -I`/`-E`/`-S`, a wrapper that sets its own PYTHONPATH, Python 3.6 to 3.9), a hook
that fails with any exception, a refusal a wrapper swallows.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from processes import without_in_force_lines

from prtoggle.protocol import BOOTSTRAP_FAILURE_EXIT_CODE
from prtoggle.revert import toggle

WORKTREE = Path(__file__).resolve().parents[2]
PR = 99301
RECIPE = f"""\
pr: {PR}
title: answer 41
patches:
  - target: unrev_target.answer
    edits:
      - match: return 42
        replacement: return 41
"""
# Finds its module next to itself even where PYTHONPATH and the script's directory are not used.
APP = """\
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import unrev_target
print(unrev_target.answer())
"""
PRTOGGLE = [sys.executable, "-m", "prtoggle"]
TAIL = f"; the command exited 0, prtoggle run exits {BOOTSTRAP_FAILURE_EXIT_CODE}\n"
SILENT = (
    f"prtoggle run: PR {PR} not reverted: no Python process of the command ran prtoggle's "
    "start-up hook (a Python started with -I, -E or -S, a script that sets its own PYTHONPATH, "
    "a Python the hook cannot run in, or no Python at all)" + TAIL
)


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> Path:
    (tmp_path / "unrev_target.py").write_text("def answer():\n    return 42\n")
    (tmp_path / "app.py").write_text(APP)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / f"{PR}.yaml").write_text(RECIPE)
    return tmp_path


def env_for(project: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WORKTREE), str(project)]),
        "PRTOGGLE_YAML_PATH": str(project / "recipes"),
    }
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    return env


def prtoggle_run(
    project: Path, *command: str, spec: str = str(PR)
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prtoggle", "run", "-r", spec, "--", *command],
        env=env_for(project),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_child_that_loads_the_hook_is_reverted_and_nothing_is_said(project: Path) -> None:
    result = prtoggle_run(project, sys.executable, "app.py")
    assert (result.returncode, result.stdout, _err(result)) == (
        0,
        "41\n",
        "",
    )


@pytest.mark.parametrize("flags", [("-I",), ("-E",), ("-S",), ("-X", "dev", "-Es")])
def test_a_python_that_ignores_pythonpath_or_site_is_one_line_and_status_78(
    project: Path, flags: tuple[str, ...]
) -> None:
    flag = next(f"-{letter}" for letter in "IES" if letter in flags[-1])
    result = prtoggle_run(project, sys.executable, *flags, "app.py")
    assert (result.returncode, result.stdout) == (BOOTSTRAP_FAILURE_EXIT_CODE, "42\n")
    assert _err(result) == (
        f"prtoggle run: PR {PR} not reverted: `{Path(sys.executable).name} {flag}` ignores "
        "PYTHONPATH or site, so prtoggle's start-up hook never ran in it (drop the flag, or "
        "call prtoggle.maybe_revert_pr_fix() in the program)" + TAIL
    )


def test_a_wrapper_that_sets_its_own_pythonpath_is_one_line_and_status_78(
    project: Path,
) -> None:
    wrapper = project / "run.sh"
    wrapper.write_text(
        f'#!/bin/sh\nexport PYTHONPATH="{project}"\nexec "{sys.executable}" app.py\n'
    )
    wrapper.chmod(0o755)
    result = prtoggle_run(project, str(wrapper))
    assert (result.returncode, result.stdout, _err(result)) == (
        BOOTSTRAP_FAILURE_EXIT_CODE,
        "42\n",
        SILENT,
    )


def test_an_isolated_python_that_reverts_by_itself_is_not_reported(project: Path) -> None:
    code = f"""\
        import sys
        sys.path[:0] = [{str(WORKTREE)!r}, {str(project)!r}]
        import prtoggle, unrev_target
        prtoggle.maybe_revert_pr_fix()
        print(unrev_target.answer())
        """
    result = prtoggle_run(project, sys.executable, "-I", "-c", textwrap.dedent(code))
    assert (result.returncode, result.stdout, _err(result)) == (
        0,
        "41\n",
        "",
    )


def test_a_refusal_swallowed_by_a_wrapper_still_ends_the_run_with_78(project: Path) -> None:
    # The wrapper's Python refuses (a value it set itself); the wrapper goes on with status 0.
    script = f'SGLANG_DEBUG_REVERT_PR=0x1 "{sys.executable}" app.py; echo wrapper went on'
    result = prtoggle_run(project, "sh", "-c", script)
    refusal = (
        "prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: SGLANG_DEBUG_REVERT_PR='0x1': '0x1' is "
        "not a PR number; expected PR numbers or COLLECTION:PR (e.g. sglang:27460) separated by "
        "commas or spaces, or 'all'; "
        "registered PRs: "
    )
    assert (result.returncode, result.stdout) == (BOOTSTRAP_FAILURE_EXIT_CODE, "wrapper went on\n")
    first, second = _err(result).splitlines()
    assert first.startswith(refusal)
    assert second.startswith(f"prtoggle run: PR {PR} not reverted in process ")
    assert second.endswith(
        f" app.py): {first[len('prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: ') :]}"
        + TAIL.rstrip()
    )


@pytest.mark.parametrize(
    ("setting", "error"),
    [
        ("²", "'²' is not a PR number"),
        (str(PR), "YAML value error: cannot read '2026-02-30' as timestamp: day is out of range"),
    ],
)
def test_any_exception_in_the_start_up_hook_is_a_refusal_with_status_78(
    project: Path, setting: str, error: str
) -> None:
    if setting == str(PR):
        (project / "recipes" / f"{PR}.yaml").write_text(
            RECIPE.replace("title:", "merged: 2026-02-30\ntitle:")
        )
    env = toggle.child_env([], base=env_for(project))
    env["SGLANG_DEBUG_REVERT_PR"] = setting
    result = subprocess.run(
        [sys.executable, "app.py"],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (BOOTSTRAP_FAILURE_EXIT_CODE, "")
    assert _err(result).startswith("prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: ")
    assert error in _err(result)
    assert _err(result).count("\n") == 1


def old_pythons() -> list[str]:
    """Python 3.6 to 3.9 interpreters of this machine (pyenv's too), those that start."""
    candidates = [f"python3.{minor}" for minor in range(6, 10)]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.[6-9].*/bin/python")))
    found = {}
    for candidate in candidates:
        try:
            probe = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[1])"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except OSError:
            continue
        if probe.returncode == 0:
            found.setdefault(probe.stdout.strip(), candidate)
    return list(found.values())


@pytest.mark.parametrize("python", old_pythons() or [pytest.param("", marks=pytest.mark.skip)])
def test_a_python_3_6_to_3_9_child_never_runs_silently_unreverted(
    project: Path, python: str
) -> None:
    result = prtoggle_run(project, python, "app.py")
    assert result.returncode == BOOTSTRAP_FAILURE_EXIT_CODE
    assert result.stdout in ("", "42\n")  # 3.6: the hook cannot even compile; the run is said
    assert _err(result).endswith(SILENT) or (
        _err(result).startswith("prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: ")
        and _err(result).count("\n") == 1
    ), _err(result)


def test_a_target_imported_and_never_patched_ends_the_run_with_78(project: Path) -> None:
    code = f"""\
        import importlib.util, sys
        path = {str(project / "unrev_target.py")!r}
        spec = importlib.util.spec_from_file_location("unrev_target", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["unrev_target"] = module
        spec.loader.exec_module(module)  # behind the import system: never patched
        print(module.answer())
        """
    result = prtoggle_run(project, sys.executable, "-c", textwrap.dedent(code))
    assert (result.returncode, result.stdout) == (BOOTSTRAP_FAILURE_EXIT_CODE, "42\n")
    child_line, run_line = _err(result).splitlines()
    assert child_line == (
        f"prtoggle: PR {PR} was requested but never reverted: unrev_target.answer imported "
        "and not patched"
    )
    assert run_line.startswith(f"prtoggle run: PR {PR} never reverted in process ")
    assert run_line.endswith("): unrev_target.answer imported and not patched" + TAIL.rstrip("\n"))


def test_a_deferred_refusal_swallowed_by_a_wrapper_still_ends_the_run_with_78(
    project: Path,
) -> None:
    # The target's module is on no path prtoggle run can see: the edit fails at its import.
    hidden = project / "hidden"
    hidden.mkdir()
    (hidden / "unrev_target.py").write_text("def answer():\n    return 7\n")
    code = "import sys; sys.path.insert(0, 'hidden'); import unrev_target"
    script = f'"{sys.executable}" -c "{code}"; echo wrapper went on'
    (project / "unrev_target.py").unlink()
    # named by collection: a bare number leaves out a recipe whose package is not importable
    result = prtoggle_run(project, "sh", "-c", script, spec=f"recipes:{PR}")
    assert (result.returncode, result.stdout) == (BOOTSTRAP_FAILURE_EXIT_CODE, "wrapper went on\n")
    lines = without_in_force_lines(
        result.stderr
    ).splitlines()  # the refusal shows the nearest lines after its first
    refusal, verdict_line = lines[0], lines[-1]
    why = (
        f"PR {PR} could not be reverted when unrev_target was imported, so it is not reverted "
        "at all: unrev_target.answer: edit 1 of 1 ("
    )
    assert refusal.startswith(f"prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: {why}")
    assert verdict_line.startswith(f"prtoggle run: PR {PR} not reverted in process ")
    assert f"...): {why}" in verdict_line  # the command line is cut at 80 characters
    assert verdict_line.endswith(TAIL.rstrip("\n"))


@pytest.mark.parametrize("warm", ["1", "0"])
def test_bisect_counts_a_run_whose_revert_never_landed_as_a_skip_not_as_good(
    project: Path, warm: str
) -> None:
    (project / "app.py").write_text(APP.replace("print(", "sys.exit(41 == "))
    result = subprocess.run(
        [*PRTOGGLE, "bisect", "-r", str(PR), "--", sys.executable, "-I", "app.py"],
        env={**env_for(project), "PRTOGGLE_WARM": warm},
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, _err(result)) == (1, "")
    lines = result.stdout.splitlines()
    run_line, seconds = lines[1], " s) - "  # the seconds the run took vary
    assert run_line.startswith(f"run 2: reverted {PR} -> not reverted, counted skip (exit 0, ")
    assert run_line.split(seconds, 1)[1] == (
        f"PR {PR} not reverted: `{Path(sys.executable).name} -I` ignores PYTHONPATH or site, so "
        "prtoggle's start-up hook never ran in it (drop the flag, or call "
        "prtoggle.maybe_revert_pr_fix() in the program)"
    )
    assert lines[-1] == f"skipped: {PR}"


def test_coverage_under_python_i_counts_the_run_its_plugin_reverted(project: Path) -> None:
    (project / "test_answer.py").write_text(
        APP.replace("print(unrev_target.answer())", "")
        + "\n\ndef test_answer():\n    assert unrev_target.answer() == 42\n"
    )
    pytest_command = [sys.executable, "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [*PRTOGGLE, "coverage", "-r", str(PR), "--", *pytest_command, "test_answer.py"],
        env=env_for(project),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, _err(result)
    lines = result.stdout.splitlines()
    # -I drops the start-up hook, but prtoggle's pytest plugin (which coverage needs for its
    # report) reverts in-process from SGLANG_DEBUG_REVERT_PR and reports the landing.
    assert lines[1].split(None, 3) == [str(PR), "recipes", "1", "test_answer.py::test_answer"]


def _err(result: subprocess.CompletedProcess[str]) -> str:
    """The run's stderr less the reverting processes' in-force lines."""
    return without_in_force_lines(result.stderr)

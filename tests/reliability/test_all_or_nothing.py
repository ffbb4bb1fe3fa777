"""All or nothing for every exception, at import too (issue 19.7): real processes, real files.

A fix of two targets: `aon_first.f` (imported before the revert) and `aon_second.g`, whose
reverted body is an expression so long that Python's parser raises RecursionError.
"""

from __future__ import annotations

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
PR = 99307
LONG = "+".join(["1"] * 30000)


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> Path:
    (tmp_path / "aon_first.py").write_text("def f():\n    return 1\n")
    (tmp_path / "aon_second.py").write_text("def g():\n    return 2\n")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / f"{PR}.yaml").write_text(
        f"pr: {PR}\ntitle: two targets\npatches:\n"
        "  - target: aon_first.f\n    edits:\n"
        "      - match: return 1\n        replacement: return 10\n"
        "  - target: aon_second.g\n    edits:\n"
        f"      - match: return 2\n        replacement: return {LONG}\n"
    )
    return tmp_path


def why(project: Path) -> str:
    return (
        f"{project / 'recipes' / f'{PR}.yaml'}:8: PR {PR}: aon_second.g "
        f"({project / 'aon_second.py'}:1): the reverted code cannot be built: RecursionError: "
        "maximum recursion depth exceeded during ast construction"
    )


def run(project: Path, *argv: str, reverts: str = "") -> subprocess.CompletedProcess[str]:
    base = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WORKTREE), str(project)]),
        "PRTOGGLE_YAML_PATH": str(project / "recipes"),
    }
    env = toggle.child_env([], base=base)
    env["SGLANG_DEBUG_REVERT_PR"] = reverts
    return subprocess.run(
        list(argv), env=env, cwd=project, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_recursion_error_at_import_restores_every_target_and_the_queries_say_so(
    project: Path,
) -> None:
    code = f"""\
        import aon_first
        from prtoggle.revert import toggle
        toggle.apply_revert({PR})
        print(aon_first.f(), toggle.patched_targets({PR}), toggle.pending_targets({PR}))
        try:
            import aon_second
        except Exception as exc:
            print(type(exc).__name__, exc)
        print(aon_first.f(), toggle.is_reverted({PR}), toggle.patched_targets({PR}))
        """
    result = run(project, sys.executable, "-c", textwrap.dedent(code))
    assert (result.returncode, without_in_force_lines(result.stderr)) == (0, "")
    assert result.stdout.splitlines() == [
        "10 ('aon_first.f',) ('aon_second.g',)",
        f"PatchApplicationError PR {PR} could not be reverted when aon_second was imported, so "
        f"it is not reverted at all: {why(project)}",
        "1 False ()",
    ]


def test_a_reverting_child_stops_with_one_line_when_a_late_target_fails(project: Path) -> None:
    code = "import aon_first, aon_second\nprint('ran half reverted')\n"
    result = run(project, sys.executable, "-c", code, reverts=str(PR))
    assert (result.returncode, result.stdout) == (BOOTSTRAP_FAILURE_EXIT_CODE, "")
    assert without_in_force_lines(result.stderr) == (
        f"prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: PR {PR} could not be reverted when "
        f"aon_second was imported, so it is not reverted at all: {why(project)}\n"
    )


def test_check_show_and_run_say_it_in_one_line(project: Path) -> None:
    prtoggle = [sys.executable, "-m", "prtoggle"]
    checked = run(project, *prtoggle, "check", str(PR))
    assert (checked.returncode, checked.stderr) == (1, "")
    assert checked.stdout.splitlines()[1] == f"{PR}  aon_second.g: FAILED: {why(project)}"
    shown = run(project, *prtoggle, "show", str(PR))
    assert (shown.returncode, shown.stderr) == (2, f"error: {why(project)}\n")
    ran = run(project, *prtoggle, "run", "-r", str(PR), "--", sys.executable, "-c", "1")
    assert (ran.returncode, ran.stdout) == (2, "")
    assert without_in_force_lines(ran.stderr) == (
        f"error: PR {PR} does not revert cleanly on the current code (aon_second.g: "
        f"{why(project)}); `prtoggle check {PR} --collection recipes` shows the nearest "
        "matching lines\n"
    )

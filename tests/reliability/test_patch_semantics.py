"""Real processes, real files: a revert of a def line takes effect or is refused, never silent."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WORKTREE = Path(__file__).resolve().parents[2]
MODULE = """\
def keep(function):
    return function


def scale(x, factor=2, *, offset=0):
    return x * factor + offset


@keep
def kept(x):
    return x
"""
DEFAULTS_FIX = 99101  # factor=2 -> 3, offset=0 -> 1
BODY_FIX = 99102  # x * factor -> x - factor
DECORATOR_FIX = 99103  # drops @keep: refused
PARAMETER_FIX = 99104  # adds bias=10 and uses it
RECIPES = {
    DEFAULTS_FIX: """\
      - target: relmod.scale
        edits:
          - match: "def scale(x, factor=2, *, offset=0):"
            replacement: "def scale(x, factor=3, *, offset=1):"
    """,
    BODY_FIX: """\
      - target: relmod.scale
        edits:
          - match: return x * factor + offset
            replacement: return x - factor + offset
    """,
    DECORATOR_FIX: """\
      - target: relmod.kept
        edits:
          - match: "@keep"
            replacement: ""
    """,
    PARAMETER_FIX: """\
      - target: relmod.scale
        edits:
          - match: |
              def scale(x, factor=2, *, offset=0):
                  return x * factor + offset
            replacement: |
              def scale(x, factor=2, bias=10, *, offset=0):
                  return x * factor + offset + bias
    """,
}


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> Path:
    """relmod.py and one recipe file per fix; returns the directory holding both."""
    (tmp_path / "relmod.py").write_text(MODULE)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for pr, patches in RECIPES.items():
        text = f"pr: {pr}\ntitle: fix {pr}\npatches:\n{textwrap.dedent(patches)}"
        (recipes / f"{pr}.yaml").write_text(text)
    return tmp_path


def run(project: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WORKTREE), str(project)]),
        "PRTOGGLE_YAML_PATH": str(project / "recipes"),
    }
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    return subprocess.run(
        list(argv), env=env, cwd=project, capture_output=True, text=True, timeout=120, check=False
    )


def prtoggle(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(project, sys.executable, "-m", "prtoggle", *args)


SHOW_SCALE = "import inspect, relmod; print(relmod.scale(2), inspect.signature(relmod.scale))"


def python_show_scale() -> list[str]:
    return [sys.executable, "-c", SHOW_SCALE]


def test_a_default_edit_reverted_by_run_takes_effect_in_the_child(project: Path) -> None:
    fixed = run(project, sys.executable, "-c", SHOW_SCALE)
    reverted = prtoggle(
        project, "run", "-r", str(DEFAULTS_FIX), "--", sys.executable, "-c", SHOW_SCALE
    )
    assert (fixed.returncode, fixed.stdout) == (0, "4 (x, factor=2, *, offset=0)\n")
    assert (reverted.returncode, reverted.stdout) == (0, "7 (x, factor=3, *, offset=1)\n"), (
        reverted.stderr
    )


def test_an_added_parameter_works_at_call_time_and_check_says_ok(project: Path) -> None:
    checked = prtoggle(project, "check", str(PARAMETER_FIX))
    assert checked.returncode == 0, checked.stdout
    reverted = prtoggle(
        project, "run", "-r", str(PARAMETER_FIX), "--", sys.executable, "-c", SHOW_SCALE
    )
    assert (reverted.returncode, reverted.stdout) == (
        0,
        "14 (x, factor=2, bias=10, *, offset=0)\n",
    ), reverted.stderr


def test_reverted_block_restores_the_very_objects(project: Path) -> None:
    code = f"""\
        import prtoggle, relmod
        f = relmod.scale
        before = (f.__code__, f.__defaults__, f.__kwdefaults__, f.__annotations__)
        with prtoggle.reverted({DEFAULTS_FIX}, {BODY_FIX}):
            inside = f(2)
        after = (f.__code__, f.__defaults__, f.__kwdefaults__, f.__annotations__)
        print(inside, f(2), all(a is b for a, b in zip(before, after)))
        """
    result = run(project, sys.executable, "-c", textwrap.dedent(code))
    assert (result.returncode, result.stdout) == (0, "0 4 True\n"), result.stderr


def test_a_decorator_edit_is_refused_by_check_show_and_run(project: Path) -> None:
    why = (
        f"{project / 'recipes' / f'{DECORATOR_FIX}.yaml'}:4: PR {DECORATOR_FIX}: relmod.kept "
        f"({project / 'relmod.py'}:9): the edit changes the decorator lines of kept(); "
        "decorators and anything outside the def's signature and body cannot take effect "
        "through a code swap"
    )
    checked = prtoggle(project, "check", str(DECORATOR_FIX))
    assert checked.returncode == 1
    assert checked.stdout.splitlines()[0] == f"{DECORATOR_FIX}  relmod.kept: FAILED: {why}"
    shown = prtoggle(project, "show", str(DECORATOR_FIX))
    assert (shown.returncode, shown.stderr) == (2, f"error: {why}\n")
    ran = prtoggle(project, "run", "-r", str(DECORATOR_FIX), "--", sys.executable, "-c", "1")
    assert ran.returncode == 2
    assert why in ran.stderr


def test_a_source_file_edited_after_import_is_refused_and_the_code_left_alone(
    project: Path,
) -> None:
    code = f"""\
        import pathlib, relmod
        from prtoggle.revert.toggle import apply_revert
        from prtoggle.errors import PrToggleError
        path = pathlib.Path(relmod.__file__)
        path.write_text("# a line added after the import\\n" + path.read_text())
        try:
            apply_revert({BODY_FIX})
        except PrToggleError as exc:
            print("refused:", exc)
        print(relmod.scale(2))
        """
    result = run(project, sys.executable, "-c", textwrap.dedent(code))
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"refused: relmod.scale: {project / 'relmod.py'} changed after relmod was loaded (it "
        "has no scale at line 5 any more); a revert edited from the file would mix code that "
        "never ran with the running code; restart the program (or re-import relmod) first\n"
        "4\n"
    )

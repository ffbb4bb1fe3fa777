"""Targets in the script a command runs as `__main__`, in real processes: refused up front."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
APP = "def compute():\n    return 1\n\n\nprint(compute())\n"
RECIPE = """\
pr: 905
patches:
  - target: {target}
    edits:
      - match: return 1
        replacement: return 2
"""


def project(tmp_path: Path, target: str) -> dict[str, str]:
    (tmp_path / "app.py").write_text(APP)
    collection = tmp_path / "recipes"
    collection.mkdir()
    (collection / "905.yaml").write_text(RECIPE.format(target=target))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PRTOGGLE_YAML_PATH": str(collection)}
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    return env


def prtoggle(
    args: list[str], tmp_path: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prtoggle", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("main", "runs"), [(["app.py"], "{tmp}/app.py"), (["-u", "-m", "app"], "python -m app")]
)
def test_run_refuses_a_target_in_the_script_it_runs_as_main(
    tmp_path: Path, main: list[str], runs: str
) -> None:
    env = project(tmp_path, "app.compute")
    result = prtoggle(["run", "-r", "905", "--", sys.executable, *main], tmp_path, env)
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        f"error: recipes/905 targets app.compute, but the command runs "
        f"{runs.format(tmp=tmp_path)} as __main__, never importing it as app: prtoggle "
        "patches a module when it is imported, so this revert would never land; move the "
        "function into a module the script imports, or run that module's code through an "
        "import\n",
    )


def test_bisect_leaves_out_a_target_in_the_script_and_says_so(tmp_path: Path) -> None:
    env = project(tmp_path, "app.compute")
    args = ["bisect", "-r", "905", "--", sys.executable, "app.py"]
    result = prtoggle(args, tmp_path, env)
    assert result.returncode == 1, result.stdout + result.stderr  # no culprit among none
    assert result.stdout.startswith(
        "skip: PR 905 is left out: recipes/905 targets app.compute, but the command runs "
        f"{tmp_path}/app.py as __main__"
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "command", [["list"], ["show", "905"], ["check"], ["run", "-r", "905", "--", "true"]]
)
def test_a_main_target_is_one_error_line_in_every_command(
    tmp_path: Path, command: list[str]
) -> None:
    env = project(tmp_path, "__main__.compute")
    result = prtoggle(command, tmp_path, env)
    if command == ["list"]:  # list shows the other recipes, the bad one as an ERROR row
        assert _last_row(result.stdout).split()[4] == "ERROR", result.stdout
    assert (result.returncode, "" if command == ["list"] else result.stdout, result.stderr) == (
        2,
        "",
        f"error: {tmp_path / 'recipes' / '905.yaml'}:3: 'target' __main__.compute names "
        "__main__, whatever script happens to run; a revert lands when a target's module is "
        "imported, and a script's own code runs before that could happen; name a module the "
        "program imports\n",
    )


def _last_row(listing: str) -> str:
    """The last row of `list`'s table (its rows start with a PR number or `?`; footnotes
    saying what `out-of-range` and `stale` mean may follow)."""
    rows = [line for line in listing.splitlines() if line[:1].isdigit() or line[:1] == "?"]
    return rows[-1]

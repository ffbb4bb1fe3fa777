"""The recipes a `prtoggle run` hands its processes parsed: used for the same text only.

Real `prtoggle run` processes on real files: a command whose Python children revert with
the run's parsed recipes (without PyYAML), and commands that change a recipe file, add a
recipe directory, point PRTOGGLE_YAML_PATH elsewhere or break the run's file before their
child starts: the child then reads the recipe files as they are.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prtoggle.protocol import RUN_REPORT_ENV
from prtoggle.recipes.parsed_recipes import PARSED_FILE

WORKTREE = Path(__file__).resolve().parents[3]
PR = 99411
RECIPE = f"""\
pr: {PR}
title: answer {{value}}
patches:
  - target: {{target}}
    edits:
      - match: return 42
        replacement: return {{value}}
"""
CHILD = (
    "import sys, target\n"
    "from prtoggle.revert.toggle import is_reverted\n"
    f"collections = [c for c in ('recipes', 'more', 'elsewhere') if is_reverted(f'{{c}}:{PR}')]\n"
    "print(target.answer(), target.other(), ','.join(collections), 'yaml' in sys.modules)\n"
)
"""What the command's child Python says: both targets' values, the collections of the PR
in force, and whether it loaded PyYAML."""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "target.py").write_text(
        "def answer():\n    return 42\n\n\ndef other():\n    return 42\n"
    )
    write_recipe(tmp_path / "recipes", value=41)
    (tmp_path / "tmp").mkdir()
    return tmp_path


def write_recipe(directory: Path, *, value: int, target: str = "target.answer") -> None:
    directory.mkdir(exist_ok=True)
    (directory / f"{PR}.yaml").write_text(RECIPE.format(value=value, target=target))


def run_then_child(project: Path, before: str = "", *, reverts: str = str(PR)) -> str:
    """`prtoggle run -r REVERTS -- python SCRIPT`: SCRIPT runs `before`, then a child Python
    that reports CHILD; what the child printed."""
    script = project / "command.py"
    script.write_text(
        "import os, subprocess, sys\nfrom pathlib import Path\n"
        + textwrap.dedent(before)
        + f"\nsubprocess.run([sys.executable, '-c', {CHILD!r}], check=True)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WORKTREE), str(project)]),
        "PRTOGGLE_YAML_PATH": str(project / "recipes"),
        "TMPDIR": str(project / "tmp"),
        "PRTOGGLE_CACHE_DIR": "0",  # the run's file alone (recipes/recipe_cache.py: its own tests)
    }
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    result = subprocess.run(
        [sys.executable, "-m", "prtoggle", "run", "-r", reverts, "--", sys.executable, str(script)],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_child_under_run_reverts_with_the_parsed_recipes_and_never_loads_pyyaml(
    project: Path,
) -> None:
    said = run_then_child(
        project,
        f"""
        parsed = Path(os.environ[{RUN_REPORT_ENV!r}], {PARSED_FILE!r})
        print('parsed-recipes file:', parsed.is_file())
        """,
    )
    assert said == "parsed-recipes file: True\n41 42 recipes False\n"


def test_a_recipe_file_changed_during_the_run_is_read_as_it_is_now(project: Path) -> None:
    said = run_then_child(
        project,
        f"""
        recipe = Path('recipes', '{PR}.yaml')
        recipe.write_text(recipe.read_text().replace('return 41', 'return 40'))
        """,
    )
    assert said == "40 42 recipes True\n"


def test_a_recipe_directory_added_during_the_run_is_read(project: Path) -> None:
    write_recipe(project / "more", value=39, target="target.other")
    said = run_then_child(
        project,
        """
        os.environ['PRTOGGLE_YAML_PATH'] += os.pathsep + str(Path('more').resolve())
        """,
    )
    assert said == "41 39 recipes,more True\n"


def test_another_yaml_path_in_a_child_reads_that_directory(project: Path) -> None:
    write_recipe(project / "elsewhere", value=41)  # the same text, another file
    said = run_then_child(
        project,
        """
        os.environ['PRTOGGLE_YAML_PATH'] = str(Path('elsewhere').resolve())
        """,
    )
    assert said == "41 42 elsewhere True\n"


@pytest.mark.parametrize(
    "content",
    ["not json", '{"format": 1, "prtoggle": "/elsewhere", "files": []}', '{"files": 3}'],
)
def test_a_parsed_recipes_file_that_cannot_be_used_leaves_the_child_to_parse(
    project: Path, content: str
) -> None:
    said = run_then_child(
        project,
        f"""
        Path(os.environ[{RUN_REPORT_ENV!r}], {PARSED_FILE!r}).write_text({content!r})
        """,
    )
    assert said == "41 42 recipes True\n"


def test_every_shipped_and_upstream_recipe_reads_back_from_the_run_as_parsed() -> None:
    show = (
        "import sys\nfrom prtoggle.recipes.registry import default_registry\n"
        "for fix in default_registry().recipes:\n    print(repr(fix))\n"
        "print('yaml' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(WORKTREE), "PRTOGGLE_CACHE_DIR": "0"}
    for name in ("SGLANG_DEBUG_REVERT_PR", "PRTOGGLE_YAML_PATH", RUN_REPORT_ENV):
        env.pop(name, None)
    parsed = subprocess.run(
        [sys.executable, "-c", show], env=env, capture_output=True, text=True, check=True
    ).stdout
    handed = subprocess.run(
        [sys.executable, "-m", "prtoggle", "run", "-r", "all", "--", sys.executable, "-c", show],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert parsed.endswith("\nTrue\n") and parsed.count("Recipe(") >= 15
    assert handed == parsed.replace("\nTrue\n", "\nFalse\n")

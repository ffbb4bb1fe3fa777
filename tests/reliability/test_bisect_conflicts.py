"""Bisect over two recipes that edit the same line: a conflict, never "none is needed"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from processes import without_in_force_lines

from prtoggle.protocol import BOOTSTRAP_FAILURE_EXIT_CODE, BOOTSTRAP_FAILURE_PREFIX
from prtoggle.revert.toggle import child_env

FIRST, SECOND = 91001, 91002
MODULE = "conflict_target"
RECIPE = """\
pr: {pr}
title: conflicting fix {pr}
merged: {merged}
component: {module}
patches:
  - target: {module}.answer
    edits:
      - match: "value = 42"
        replacement: "value = {value}"
"""
CHECK = f"import sys, {MODULE} as m; sys.exit(0 if m.answer() == 42 else 1)"


@pytest.fixture
def project(tmp_path: Path) -> dict[str, str]:
    """Two recipes that both rewrite `value = 42`; the env a real prtoggle process needs."""
    source, recipes = tmp_path / "src", tmp_path / "recipes"
    source.mkdir()
    recipes.mkdir()
    (source / f"{MODULE}.py").write_text("def answer():\n    value = 42\n    return value\n")
    for pr, merged, value in ((FIRST, "2026-01-01", 41), (SECOND, "2026-02-01", 40)):
        text = RECIPE.format(pr=pr, merged=merged, module=MODULE, value=value)
        (recipes / f"{pr}.yaml").write_text(text)
    python_path = os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": python_path, "PRTOGGLE_YAML_PATH": str(recipes)}


def bisect(env: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "prtoggle", "bisect", "-r", f"{FIRST},{SECOND}", *options]
    return subprocess.run(
        [*argv, "--", sys.executable, "-c", CHECK],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("mode", ["ordered", "ddmin"])
def test_a_conflicting_all_reverted_run_makes_the_search_inconclusive(
    project: dict[str, str], mode: str
) -> None:
    done = bisect(project, "--mode", mode)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("run 1: reverted none -> good (exit 0, ")
    assert lines[1].startswith(
        f"run 2: reverted {FIRST}, {SECOND} -> conflict, counted skip (no exit status, 0.0 s) "
        f"- conflict: the reverts of {FIRST}, {SECOND} cannot apply together: "
        f"{MODULE}.answer: edit 1 of 1"
    )
    assert lines[-2] == f"no culprit found ({mode}, 2 runs)"
    assert lines[-1].startswith(
        "inconclusive: the run with every candidate reverted cannot be judged: "
        f"the reverts of {FIRST}, {SECOND} conflict: they cannot be applied together ("
    )
    assert lines[-1].endswith(
        "); bisect fewer candidates (-r) so that their reverts apply together"
    )
    assert "none of the candidate fixes is needed" not in done.stdout


def test_the_json_answer_marks_the_conflicting_run(project: dict[str, str]) -> None:
    done = bisect(project, "--mode", "ordered", "--json")
    assert done.returncode == 1
    answer = json.loads(done.stdout)
    assert answer["found"] is False
    conflict = answer["probes"][1]
    assert (conflict["reverted"], conflict["class"], conflict["verdict"]) == (
        [FIRST, SECOND],
        "conflict",
        "skip",
    )
    assert conflict["exit_code"] is None
    assert answer["conclusion"].startswith("inconclusive: ")


def test_attribute_still_names_each_fix_whose_revert_alone_fails(project: dict[str, str]) -> None:
    done = bisect(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-2:] == [
        f"culprits: {FIRST}, {SECOND} (attribute, 3 runs)",
        f"reverting {FIRST}, {SECOND} alone makes the command fail",
    ]


def test_the_conflict_is_real_a_child_asked_for_both_cannot_start(
    project: dict[str, str],
) -> None:
    env = child_env((FIRST, SECOND), base=project)
    done = subprocess.run(
        [sys.executable, "-c", CHECK],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # The bootstrap refuses to run the program unreverted: one line, its documented status.
    assert done.returncode == BOOTSTRAP_FAILURE_EXIT_CODE
    assert without_in_force_lines(done.stderr).startswith(f"{BOOTSTRAP_FAILURE_PREFIX}: ")
    assert "PR 91002 could not be reverted" in done.stderr

"""A requested revert reaches the program whatever starts it (issues 25.1, 25.2, 25.4, 25.5).

Real `prtoggle run` processes on real files: a Python launcher that re-executes Python with
its own PYTHONPATH, a child that changes directory under a relative PRTOGGLE_YAML_PATH,
`prtoggle run` inside `prtoggle run` (and inside `bisect`), and an empty `-r`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prtoggle.revert.processes import BOOTSTRAP_DIR

WORKTREE = Path(__file__).resolve().parents[2]
PRTOGGLE = [sys.executable, "-m", "prtoggle"]
OUTER, INNER = 99501, 99502
RECIPE = """\
pr: {pr}
title: answer {value}
patches:
  - target: {target}
    edits:
      - match: return {match}
        replacement: return {value}
"""
APP = """\
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nest_a, nest_b
print(nest_a.answer(), nest_b.answer())
"""


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> Path:
    (tmp_path / "nest_a.py").write_text("def answer():\n    return 1\n")
    (tmp_path / "nest_b.py").write_text("def answer():\n    return 2\n")
    (tmp_path / "app.py").write_text(APP)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for pr, target, match, value in (
        (OUTER, "nest_a.answer", 1, 10),
        (INNER, "nest_b.answer", 2, 20),
    ):
        recipe = RECIPE.format(pr=pr, target=target, match=match, value=value)
        (recipes / f"{pr}.yaml").write_text(recipe)
    return tmp_path


def env_for(project: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WORKTREE), str(project)]),
        "PRTOGGLE_YAML_PATH": str(project / "recipes"),
        **extra,
    }
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    return env


def run(
    project: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PRTOGGLE, *args],
        env=env or env_for(project),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


LAUNCHER = """\
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = here  # the launcher's own: prtoggle's start-up hook dropped
os.execv(sys.executable, [sys.executable, *{options!r}, os.path.join(here, "app.py")])
"""


def test_a_python_launcher_that_execs_python_with_its_own_pythonpath_runs_it_reverted(
    project: Path,
) -> None:
    (project / "launcher.py").write_text(LAUNCHER.format(options=[]))
    result = run(project, "run", "-r", str(OUTER), "--", sys.executable, "launcher.py")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "10 2\n",
        f"prtoggle run: PR {OUTER} in force in 1 process (recipes/{OUTER})\n",
    )


def test_a_launcher_that_execs_python_with_its_own_environment_runs_it_reverted(
    project: Path,
) -> None:
    launcher = (
        "import os, sys\n"
        "here = os.path.dirname(os.path.abspath(__file__))\n"
        "os.execve(sys.executable, [sys.executable, os.path.join(here, 'app.py')],"
        " {'PYTHONPATH': here, 'PATH': os.environ['PATH']})\n"
    )
    (project / "launcher.py").write_text(launcher)
    result = run(project, "run", "-r", str(OUTER), "--", sys.executable, "launcher.py")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "10 2\n",
        f"prtoggle run: PR {OUTER} in force in 1 process (recipes/{OUTER})\n",
    )


def test_an_execd_python_that_keeps_the_hook_out_ends_the_run_with_78(project: Path) -> None:
    (project / "launcher.py").write_text(LAUNCHER.format(options=["-I"]))
    result = run(project, "run", "-r", str(OUTER), "--", sys.executable, "launcher.py")
    assert (result.returncode, result.stdout) == (78, "1 2\n")
    line = result.stderr
    assert line.startswith(f"prtoggle run: PR {OUTER} not reverted in process "), line
    assert f": it exec'd `{sys.executable} -I " in line  # the command line cut at 80 characters
    assert line.endswith(
        ", a Python that never reported (its options or environment kept prtoggle's start-up "
        "hook out); the command exited 0, prtoggle run exits 78\n"
    )


def test_a_relative_recipe_path_is_resolved_once_not_in_each_childs_directory(
    project: Path,
) -> None:
    elsewhere = project / "elsewhere" / "recipes"
    elsewhere.mkdir(parents=True)  # another folder's recipe of the same name and PR
    other = RECIPE.format(pr=OUTER, target="nest_a.answer", match=1, value=99)
    (elsewhere / f"{OUTER}.yaml").write_text(other)
    code = (
        "import os, subprocess, sys\n"
        "os.chdir('elsewhere')\n"
        "subprocess.run([sys.executable, os.path.join('..', 'app.py')], check=True)\n"
    )
    env = env_for(project, PRTOGGLE_YAML_PATH="recipes")
    result = run(project, "run", "-r", str(OUTER), "--", sys.executable, "-c", code, env=env)
    assert (result.returncode, result.stdout) == (0, "10 2\n")


def test_a_run_inside_a_run_keeps_the_outer_revert_and_each_level_says_so(
    project: Path,
) -> None:
    inner = [*PRTOGGLE, "run", "-r", str(INNER), "--", sys.executable, "app.py"]
    result = run(project, "run", "-r", str(OUTER), "--", *inner)
    assert (result.returncode, result.stdout) == (0, "10 20\n")
    assert result.stderr.splitlines() == [
        f"prtoggle run: PRs {OUTER}, {INNER} in force in 1 process (recipes/{OUTER}, "
        f"recipes/{INNER})",
        f"prtoggle run: PR {OUTER} in force in 2 processes (recipes/{OUTER})",
    ]


def test_a_revert_exported_by_hand_is_replaced_by_r_and_one_line_says_so(
    project: Path,
) -> None:
    env = {**env_for(project), "SGLANG_DEBUG_REVERT_PR": str(OUTER)}
    result = run(project, "run", "-r", str(INNER), "--", sys.executable, "app.py", env=env)
    assert (result.returncode, result.stdout) == (0, "1 20\n")
    assert result.stderr.splitlines() == [
        f"prtoggle run: SGLANG_DEBUG_REVERT_PR='{OUTER}' from the environment is replaced by "
        "-r (inside a prtoggle run, bisect or coverage the two would be composed)",
        f"prtoggle run: PR {INNER} in force in 1 process (recipes/{INNER})",
    ]


def test_bisect_of_a_command_that_calls_prtoggle_run_keeps_the_bisected_revert(
    project: Path,
) -> None:
    check = (
        "import os, subprocess, sys\n"
        f"out = subprocess.run([*{PRTOGGLE!r}, 'run', '-r', '{INNER}', '--', sys.executable,"
        " 'app.py'], capture_output=True, text=True).stdout\n"
        "sys.exit(1 if out.split()[0] == '10' else 0)\n"  # bad when the outer revert landed
    )
    result = run(project, "bisect", "-r", str(OUTER), "--", sys.executable, "-c", check)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"reverting {OUTER} alone makes the command fail"


@pytest.mark.parametrize("spec", ["", " ", "0"])
def test_an_empty_revert_spec_is_one_error_line_and_status_2(project: Path, spec: str) -> None:
    result = run(project, "run", "-r", spec, "--", sys.executable, "app.py")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: -r {spec!r} names no PR (an unset shell variable?); expected PR numbers "
        "(26521,24856), COLLECTION:PR (sglang:27460) or 'all'; to run COMMAND with nothing "
        "reverted, run it without prtoggle\n"
    )


BOTH_REVERTED_FAILS = (
    "import os, sys\n"
    "sys.path.insert(0, os.getcwd())\n"
    "import nest_a, nest_b\n"
    "sys.exit(1 if (nest_a.answer(), nest_b.answer()) == (10, 20) else 0)\n"
)
"""Bad only when both reverts are in force: the outer one (10) and the bisected one (20)."""


def test_bisect_inside_a_run_keeps_the_outer_revert_in_every_run_and_says_so(
    project: Path,
) -> None:
    bisect = [*PRTOGGLE, "bisect", "-r", str(INNER), "--", sys.executable, "-c"]
    result = run(project, "run", "-r", str(OUTER), "--", *bisect, BOTH_REVERTED_FAILS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"reverting {INNER} alone makes the command fail"
    assert result.stderr.splitlines() == [
        f"prtoggle bisect: SGLANG_DEBUG_REVERT_PR='{OUTER}' of the outer prtoggle run stays "
        f"in force in every run (PR {OUTER} reverted throughout, never a candidate)",
        f"prtoggle run: PR {OUTER} in force in 3 processes (recipes/{OUTER})",
    ]


def test_bisect_under_a_revert_exported_by_hand_says_in_one_line_it_is_not_kept(
    project: Path,
) -> None:
    env = {**env_for(project), "SGLANG_DEBUG_REVERT_PR": str(OUTER)}
    args = ["bisect", "-r", str(INNER), "--", sys.executable, "-c", BOTH_REVERTED_FAILS]
    result = run(project, *args, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines()[-2] == "no culprit found (attribute, 2 runs)"
    assert result.stderr.splitlines() == [
        f"prtoggle bisect: SGLANG_DEBUG_REVERT_PR='{OUTER}' from the environment is not kept: "
        "bisect chooses what each of its runs reverts (inside a prtoggle run the two would be "
        "composed)",
    ]


GUARD_TEST = """\
import nest_a, nest_b


def test_answers():
    assert (nest_a.answer(), nest_b.answer()) == (10, 2)
"""
"""Passes with the outer revert alone in force; fails once the inner one is reverted too."""


def test_coverage_inside_a_run_keeps_the_outer_revert_in_every_run_and_says_so(
    project: Path,
) -> None:
    (project / "test_answers.py").write_text(GUARD_TEST)
    pytest_command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    coverage = [*PRTOGGLE, "coverage", "--cold", "--json", "-r", str(INNER), "--"]
    command = [*coverage, *pytest_command, "test_answers.py"]
    result = run(project, "run", "-r", str(OUTER), "--", *command)
    assert result.returncode == 0, result.stdout + result.stderr
    matrix = json.loads(result.stdout)
    assert [(fix["pr"], fix["guarded_by"], fix["plain_failing"]) for fix in matrix] == [
        (INNER, ["test_answers.py::test_answers"], [])
    ]
    assert result.stderr.splitlines()[0] == (
        f"prtoggle coverage: SGLANG_DEBUG_REVERT_PR='{OUTER}' of the outer prtoggle run stays "
        f"in force in every run (PR {OUTER} reverted throughout, never a candidate)"
    )


SPAWNER = """\
import os, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
argv = [sys.executable, os.path.join(here, "app.py")]
{how}
"""
OWN_PYTHONPATH = "{**os.environ, 'PYTHONPATH': here}"
SPAWNS = {
    "posix_spawn": f"os.waitpid(os.posix_spawn(sys.executable, argv, {OWN_PYTHONPATH}), 0)",
    "posix_spawnp": f"os.waitpid(os.posix_spawnp(sys.executable, argv, {OWN_PYTHONPATH}), 0)",
}


@pytest.mark.parametrize("call", sorted(SPAWNS))
def test_a_posix_spawn_whose_environment_drops_the_hook_is_refused_never_a_silent_child(
    project: Path, call: str
) -> None:
    how = f"try:\n    {SPAWNS[call]}\nexcept Exception as exc:\n    print(type(exc).__name__, exc)"
    (project / "spawner.py").write_text(SPAWNER.format(how=how))
    result = run(project, "run", "-r", str(OUTER), "--", sys.executable, "spawner.py")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        f"RunnerError os.posix_spawn of {sys.executable}: its environment asks for "
        f"SGLANG_DEBUG_REVERT_PR={OUTER} but its PYTHONPATH leaves out prtoggle's start-up "
        f"hook ({BOOTSTRAP_DIR}), so the child would run unreverted; give it an environment "
        "whose PYTHONPATH starts with that directory (os.environ has it), start it with "
        "subprocess, or leave SGLANG_DEBUG_REVERT_PR out of its environment to run it "
        "unreverted\n",
        f"prtoggle run: PR {OUTER} requested in 1 process, but no process imported its code, "
        f"so nothing was reverted (recipes/{OUTER})\n",
    )


CHILDREN = {
    "posix_spawn with os.environ": (
        "os.waitpid(os.posix_spawn(sys.executable, argv, os.environ), 0)"
    ),
    "os.spawnve with its own PYTHONPATH (fork, then exec)": (
        f"os.spawnve(os.P_WAIT, sys.executable, argv, {OWN_PYTHONPATH})"
    ),
    "subprocess with its own PYTHONPATH": f"subprocess.run(argv, env={OWN_PYTHONPATH})",
    "subprocess through posix_spawn": (
        f"subprocess.run(argv, env={OWN_PYTHONPATH}, close_fds=False)"  # _USE_POSIX_SPAWN
    ),
}


@pytest.mark.parametrize("child", sorted(CHILDREN))
def test_a_spawned_child_whose_environment_asks_for_the_revert_runs_reverted(
    project: Path, child: str
) -> None:
    (project / "spawner.py").write_text(SPAWNER.format(how=CHILDREN[child]))
    result = run(project, "run", "-r", str(OUTER), "--", sys.executable, "spawner.py")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "10 2\n",
        f"prtoggle run: PR {OUTER} in force in 2 processes (recipes/{OUTER})\n",
    )

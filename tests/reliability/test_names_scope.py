"""Whole-fix reverts (`names`) in real processes: what they touch, and when they are in force.

Small packages written to a temporary directory and imported for real; `prtoggle run` and
`SGLANG_DEBUG_REVERT_PR` + `maybe_revert_pr_fix()` in real subprocesses (issue 32.1, 32.7).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WORKTREE = Path(__file__).resolve().parents[2]
PRTOGGLE = [sys.executable, "-m", "prtoggle"]
PR = 99701
PACKAGE = {
    "scoped/__init__.py": "",
    "scoped/other.py": "WIDTH = 8\n",
    "dtyped/__init__.py": "",
    "dtyped/core.py": """\
        import torch

        DTYPE = torch.bfloat16
        EMPTY = ()
        """,
    "scoped/core.py": """\
        LIMIT = 2
        TABLE = {"limit": 2}


        def limit():
            return LIMIT
        """,
}
DTYPE_PR = 99702
DTYPE_RECIPE = f"""\
pr: {DTYPE_PR}
title: the dtype was float16
names:
  - scope: dtyped.core
    define: |
      DTYPE = torch.float16
      EMPTY = ("old",)
"""
TWO_SCOPES_PR = 99703
TWO_SCOPES_RECIPE = f"""\
pr: {TWO_SCOPES_PR}
title: two modules
names:
  - scope: scoped.other
    define: |
      WIDTH = 4
  - scope: scoped.core
    define: |
      LIMIT = 1
"""
RECIPE = f"""\
pr: {PR}
title: the limit was 1
names:
  - scope: scoped.core
    define: |
      LIMIT = 1
      TABLE = {{"limit": 1}}
"""


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> Path:
    for name, text in PACKAGE.items():
        path = tmp_path / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / f"{PR}.yaml").write_text(RECIPE)
    (tmp_path / "recipes" / f"{DTYPE_PR}.yaml").write_text(DTYPE_RECIPE)
    (tmp_path / "recipes" / f"{TWO_SCOPES_PR}.yaml").write_text(TWO_SCOPES_RECIPE)
    return tmp_path


def env_for(project: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WORKTREE), str(project / "src")]),
        "PRTOGGLE_YAML_PATH": str(project / "recipes"),
        **extra,
    }
    if "SGLANG_DEBUG_REVERT_PR" not in extra:
        env.pop("SGLANG_DEBUG_REVERT_PR", None)
    return env


def run(project: Path, args: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        env=env_for(project, **extra),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_a_run_that_imports_the_package_but_not_the_scope_module_is_not_refused(
    project: Path,
) -> None:
    program = [sys.executable, "-c", "import scoped; print('ran')"]
    result = run(project, [*PRTOGGLE, "run", "-r", str(PR), "--", *program])
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "ran\n",
        f"prtoggle run: PR {PR} requested in 1 process, but no process imported its code, so "
        f"nothing was reverted (recipes/{PR})\n",
    )


def test_maybe_revert_pr_fix_in_a_program_that_never_imports_the_scope_says_nothing_at_exit(
    project: Path,
) -> None:
    code = "import prtoggle, scoped\nprtoggle.maybe_revert_pr_fix()\nprint('ran')\n"
    result = run(project, [sys.executable, "-c", code], SGLANG_DEBUG_REVERT_PR=str(PR))
    assert (result.returncode, result.stdout, result.stderr) == (0, "ran\n", "")


def test_a_run_that_imports_one_scope_of_two_says_the_other_is_not_yet_in_force(
    project: Path,
) -> None:
    program = [sys.executable, "-c", "import scoped.other; print(scoped.other.WIDTH)"]
    result = run(project, [*PRTOGGLE, "run", "-r", str(TWO_SCOPES_PR), "--", *program])
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "4\n",
        f"prtoggle run: PR {TWO_SCOPES_PR} in force in 1 process (recipes/{TWO_SCOPES_PR}); "
        "not imported, so not yet in force: names of scoped.core\n",
    )


def test_the_scope_imported_later_lands_and_its_run_says_in_force(project: Path) -> None:
    program = [sys.executable, "-c", "import scoped.core; print(scoped.core.limit())"]
    result = run(project, [*PRTOGGLE, "run", "-r", str(PR), "--", *program])
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "1\n",
        f"prtoggle run: PR {PR} in force in 1 process (recipes/{PR})\n",
    )


def test_a_revert_rebinding_a_torch_dtype_leaves_torch_and_main_s_own_values_alone(
    project: Path,
) -> None:
    # __main__ holds the very objects the scope rebinds (torch.bfloat16, the empty tuple)
    # when the revert lands, without importing them from the scope: not copies.
    (project / "main.py").write_text(
        "import torch\n"
        "DTYPE = torch.bfloat16\n"
        "EMPTY = ()\n"
        "import dtyped.core\n"
        "print(torch.bfloat16, DTYPE, EMPTY, dtyped.core.DTYPE, dtyped.core.EMPTY)\n"
    )
    program = [sys.executable, "main.py"]
    result = run(project, [*PRTOGGLE, "run", "-r", str(DTYPE_PR), "--", *program])
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "torch.bfloat16 torch.bfloat16 () torch.float16 ('old',)\n",
        f"prtoggle run: PR {DTYPE_PR} in force in 1 process (recipes/{DTYPE_PR})\n",
    )


def test_main_importing_the_name_follows_and_a_main_without_source_is_said(
    project: Path,
) -> None:
    code = (
        "from scoped.core import TABLE\n"
        "import prtoggle, scoped.core\n"
        "prtoggle.maybe_revert_pr_fix()\n"
        "print(TABLE, scoped.core.TABLE)\n"
    )
    (project / "main.py").write_text(code)
    from_file = run(project, [sys.executable, "main.py"], SGLANG_DEBUG_REVERT_PR=str(PR))
    assert (from_file.returncode, from_file.stdout, from_file.stderr) == (
        0,
        "{'limit': 1} {'limit': 1}\n",
        "",
    )
    inline = run(project, [sys.executable, "-c", code], SGLANG_DEBUG_REVERT_PR=str(PR))
    assert (inline.returncode, inline.stdout, inline.stderr) == (
        0,
        "{'limit': 2} {'limit': 1}\n",
        f"{project / 'recipes' / f'{PR}.yaml'}:4: PR {PR}: `TABLE` of module scoped.core is "
        "also held as __main__.TABLE, whose source cannot be read, so whether it is a copy "
        "(an import of that name) is unknown: it keeps the post-fix object\n",
    )

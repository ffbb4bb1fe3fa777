"""What `prtoggle run` hears from its command's processes, and says (issues 25.3, 26.4, 26.10).

Real `prtoggle run` processes on real files: a package whose `__init__` fails after importing
a namespace subpackage, processes that outlive the command and write their report late,
report files that are not reports, children that stay quiet while the parent says once
what landed where.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKTREE = Path(__file__).resolve().parents[2]
PR = 99401
RECIPE = f"""\
pr: {PR}
title: answer 41
patches:
  - target: {{target}}
    edits:
      - match: return 42
        replacement: return 41
"""


def write_recipe(project: Path, target: str) -> None:
    recipes = project / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / f"{PR}.yaml").write_text(RECIPE.format(target=target))


def prtoggle_run(
    project: Path, *command: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    base = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WORKTREE), str(project)]),
        "PRTOGGLE_YAML_PATH": str(project / "recipes"),
        "TMPDIR": str(project / "tmp"),
    }
    base.pop("SGLANG_DEBUG_REVERT_PR", None)
    (project / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "prtoggle", "run", "-r", str(PR), "--", *command],
        env={**base, **(env or {})},
        cwd=project,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_package_that_fails_after_importing_a_namespace_subpackage_gets_no_atexit_noise(
    tmp_path: Path,
) -> None:
    (tmp_path / "pkg" / "ns").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text(
        "import pkg.ns.mod\nraise RuntimeError('No supported accelerator')\n"
    )
    (tmp_path / "pkg" / "ns" / "mod.py").write_text("def f():\n    return 1\n")
    (tmp_path / "pkg" / "ns" / "other.py").write_text("def answer():\n    return 42\n")
    write_recipe(tmp_path, "pkg.ns.other.answer")
    result = prtoggle_run(tmp_path, sys.executable, "-c", "import pkg.ns.mod")
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback (most recent call last):\n")  # the program's
    assert result.stderr.endswith(
        "RuntimeError: No supported accelerator\n"
        f"prtoggle run: PR {PR} requested in 1 process, but no process imported its code, so "
        f"nothing was reverted (recipes/{PR})\n"
    )
    assert "Exception ignored" not in result.stderr
    assert "KeyError" not in result.stderr


LATE_WRITER = """\
import os, subprocess, sys
# A process that outlives the command and keeps writing its report (as multiprocessing's
# resource tracker or a daemon does at its exit) while `prtoggle run` cleans up.
writer = (
    "import time\\n"
    "import prtoggle.protocol as protocol\\n"
    "end = time.monotonic() + 3\\n"
    "while time.monotonic() < end:\\n"
    "    protocol.write_run_report(\\n"
    "        {'state': 'in-force', 'recipes': {'99401': ['recipes/99401']}}\\n"
    "    )\\n"
)
late = subprocess.Popen([sys.executable, "-c", writer], start_new_session=True)
report = os.path.join(os.environ["PRTOGGLE_RUN_REPORT_DIR"], f"{late.pid}.json")
while not os.path.exists(report):  # exit only once it is writing
    pass
import target
sys.exit(3 if target.answer() == 41 else 4)
"""


def test_a_process_that_writes_its_report_after_the_command_exited_changes_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "target.py").write_text("def answer():\n    return 42\n")
    (tmp_path / "app.py").write_text(LATE_WRITER)
    write_recipe(tmp_path, "target.answer")
    statuses = set()
    for _attempt in range(3):  # the race is likely at each attempt; every one must hold
        result = prtoggle_run(tmp_path, sys.executable, "app.py")
        statuses.add(result.returncode)
        assert result.stderr == f"prtoggle run: PR {PR} in force in 2 processes (recipes/{PR})\n"
    assert statuses == {3}  # the command's own status, reverted
    assert sorted(os.listdir(tmp_path / "tmp")) == []  # no prtoggle-run-* directory left


@pytest.mark.parametrize("content", ["[]", "null", '{"pid": "x"}', '{"pid": 1, "state": 2}'])
def test_a_report_file_that_is_not_a_report_is_ignored(tmp_path: Path, content: str) -> None:
    (tmp_path / "target.py").write_text("def answer():\n    return 42\n")
    write_recipe(tmp_path, "target.answer")
    script = (
        f"printf '%s' '{content}' > \"$PRTOGGLE_RUN_REPORT_DIR/1.json\"; "
        f'"{sys.executable}" -c "import target, sys; sys.exit(target.answer())"'
    )
    result = prtoggle_run(tmp_path, "sh", "-c", script)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 41


QUIET = """\
import subprocess, sys
import target
# A test that asserts on its subprocess's stderr, as sglang's own tests do.
child = subprocess.run(
    [sys.executable, "-c", "import target; print(target.answer())"],
    capture_output=True, text=True, check=True,
)
print(target.answer(), child.stdout.strip(), repr(child.stderr))
"""


def test_children_are_quiet_and_run_says_once_where_the_reverts_were_in_force(
    tmp_path: Path,
) -> None:
    (tmp_path / "target.py").write_text("def answer():\n    return 42\n")
    (tmp_path / "app.py").write_text(QUIET)
    write_recipe(tmp_path, "target.answer")
    result = prtoggle_run(tmp_path, sys.executable, "app.py")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "41 41 ''\n",
        f"prtoggle run: PR {PR} in force in 2 processes (recipes/{PR})\n",
    )


def test_a_recipe_whose_code_no_process_imported_is_never_said_to_be_in_force(
    tmp_path: Path,
) -> None:
    (tmp_path / "target.py").write_text("def answer():\n    return 42\n")
    write_recipe(tmp_path, "target.answer")
    result = prtoggle_run(tmp_path, sys.executable, "-c", "pass")
    assert (result.returncode, result.stderr) == (
        0,
        f"prtoggle run: PR {PR} requested in 1 process, but no process imported its code, so "
        f"nothing was reverted (recipes/{PR})\n",
    )

"""One answer per recipe: `check`, `check --source-root`, `show`, `run` and `reverted()` agree.

Real `prtoggle` processes on the same fixtures: a target re-exported from another module or
from a package's `__init__`, a package in the working directory (not installed), and a
recipe whose text no longer matches (every command refuses it alike).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PRICE = "def price(base):\n    total = base * 2\n    return total\n"
RECIPE = """\
pr: {pr}
patches:
  - target: {target}
    edits:
      - match: total = base * {fixed}
        replacement: total = base * 3
"""
FILES = {
    "installed/shop/__init__.py": "from .new import price\n",
    "installed/shop/new.py": PRICE,
    "installed/shop/old.py": "from shop.new import price\n",
    "installed/shop/aliased.py": "import shop.new as moved\n",
    "work/local_shop/__init__.py": "",
    "work/local_shop/prices.py": PRICE,
    "bin/prtoggle": "import sys\nfrom prtoggle.cli.main import main\n\nsys.exit(main())\n",
}
"""`bin/prtoggle` runs as the console script does: its own folder, not the working
directory, first on its path (`python -m prtoggle` would put the working directory there)."""


@dataclass(frozen=True)
class Case:
    """A recipe on the fixtures, the module a program imports, and the one expected answer."""

    name: str
    target: str
    module: str
    reverts: bool = True
    fixed: int = 2

    @property
    def root(self) -> str:
        """The source root holding the target's package."""
        return "work" if self.target.startswith("local_") else "installed"


CASES = [
    Case("plain", "shop.new.price", "shop.new"),
    Case("re-export", "shop.old.price", "shop.old"),
    Case("init re-export", "shop.price", "shop"),
    Case("module alias", "shop.aliased.moved.price", "shop.aliased"),
    Case("working directory", "local_shop.prices.price", "local_shop.prices"),
    Case("stale re-export", "shop.old.price", "shop.old", reverts=False, fixed=5),
    Case("stale here", "local_shop.prices.price", "local_shop.prices", reverts=False, fixed=5),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for relative, text in FILES.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "recipes").mkdir()
    return tmp_path


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_check_source_root_show_run_and_reverted_give_one_answer(project: Path, case: Case) -> None:
    pr = 960 + CASES.index(case)
    recipe = RECIPE.format(pr=pr, target=case.target, fixed=case.fixed)
    (project / "recipes" / f"{pr}.yaml").write_text(recipe)
    program = f"import {case.module}; print({case.target}(10))"
    in_code = f"import prtoggle\nwith prtoggle.reverted({pr}):\n    {program}"
    check = prtoggle(project, "check", str(pr))
    tree = prtoggle(project, "check", str(pr), "--source-root", str(project / case.root))
    show = prtoggle(project, "show", str(pr))
    run = prtoggle(project, "run", "-r", str(pr), "--", sys.executable, "-c", program)
    reverted = python(project, "-c", in_code)
    answers = {
        "check": check.returncode == 0 and f"{case.target}: ok" in check.stdout,
        "check --source-root": tree.returncode == 0 and f"{case.target}: ok" in tree.stdout,
        "show": show.returncode == 0 and "+    total = base * 3\n" in show.stdout,
        "run": (run.returncode, run.stdout) == (0, "30\n"),
        "reverted()": (reverted.returncode, reverted.stdout) == (0, "30\n"),
    }
    outputs = [check, tree, show, run, reverted]
    details = "\n".join(
        f"{name}: {done.stdout}{done.stderr}" for name, done in zip(answers, outputs, strict=True)
    )
    assert answers == dict.fromkeys(answers, case.reverts), details


def test_a_re_exported_target_is_checked_where_it_is_defined_and_says_so(project: Path) -> None:
    (project / "recipes" / "970.yaml").write_text(
        RECIPE.format(pr=970, target="shop.old.price", fixed=2)
    )
    live = prtoggle(project, "check", "970")
    tree = prtoggle(project, "check", "970", "--source-root", str(project / "installed"))
    line = "970  shop.old.price: ok (defined as shop.new.price)\n"
    assert (live.returncode, live.stdout.splitlines(keepends=True)[0]) == (0, line)
    assert (tree.returncode, tree.stdout.splitlines(keepends=True)[0]) == (0, line)


def test_a_package_found_nowhere_fails_check_and_show_naming_where_it_was_looked_for(
    project: Path,
) -> None:
    (project / "recipes" / "971.yaml").write_text(
        RECIPE.format(pr=971, target="nowhere_shop.prices.price", fixed=2)
    )
    check = prtoggle(project, "check", "971")
    show = prtoggle(project, "show", "971")
    where = f"package nowhere_shop is not installed here, nor in {project / 'work'}"
    assert (check.returncode, check.stdout.splitlines()[0]) == (
        1,
        f"971  nowhere_shop.prices.price: absent: {where}",
    )
    assert (show.returncode, show.stderr) == (
        2,
        f"error: PR 971 (recipes): {where}, so there is no source to diff; `prtoggle check "
        "--source-root DIR` reads a source tree instead\n",
    )


def prtoggle(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return python(project, str(project / "bin" / "prtoggle"), *args)


def python(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in the working directory `work/` with `installed/` on the path."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(project / "installed"), str(REPO_ROOT)]),
        "PRTOGGLE_YAML_PATH": str(project / "recipes"),
    }
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    return subprocess.run(
        [sys.executable, *args],
        cwd=project / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_bisect_finds_a_culprit_in_a_package_of_the_working_directory_as_run_does(
    project: Path,
) -> None:
    (project / "recipes" / "972.yaml").write_text(
        RECIPE.format(pr=972, target="local_shop.prices.price", fixed=2)
    )
    program = "import sys, local_shop.prices as p; sys.exit(p.price(10) != 20)"
    result = prtoggle(project, "bisect", "-r", "972", "--", sys.executable, "-c", program)
    assert (result.returncode, result.stdout.splitlines()[-2:]) == (
        0,
        ["culprit: 972 (attribute, 2 runs)", "reverting 972 alone makes the command fail"],
    ), result.stdout + result.stderr

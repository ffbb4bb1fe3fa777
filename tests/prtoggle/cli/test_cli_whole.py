"""Tests for whole-fix recipes in the CLI: show, list, run (children and grandchildren),
--whole-only on run, coverage and bisect, partial answers marked. Real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CORE = """\
LIMIT = 8192


def new_helper(x):
    return x * 2


def compute(x):
    return new_helper(x) + LIMIT


class Base:
    def forward(self):
        return "base"


class Child(Base):
    def forward(self):
        return "child"
"""
USER = "from app.core import LIMIT\n"
RECIPE = """\
pr: 931
title: a helper, a constant and an override
patches:
  - target: app.core.compute
    edits:
      - match: return new_helper(x) + LIMIT
        replacement: return _old_helper(x) + LIMIT
names:
  - scope: app.core
    define: |
      LIMIT = 4096
      def _old_helper(x):
          return x + 1
    remove: [new_helper]
  - scope: app.core.Child
    remove: [forward]
"""
PARTIAL = """\
not_reverted:
  - file: app/core.py
    line: 9
    code: "def compute(x):"
    reason: decorator of compute changed
"""
NOTE = "partial: 1 change not reverted: app/core.py:9 decorator of compute changed"
PROBE = """\
import multiprocessing, sys
import app.core, app.user

def report():
    import app.core, app.user
    return (app.core.LIMIT, app.user.LIMIT, hasattr(app.core, "new_helper"),
            app.core.compute(1), app.core.Child().forward())

if __name__ == "__main__":
    print("child", *report())
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        print("grandchild", *pool.apply(report))
"""


@dataclass
class Project:
    root: Path
    env: dict[str, str]

    def prtoggle(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "prtoggle", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture(params=["whole", "partial"])
def project(tmp_path: Path, request: pytest.FixtureRequest) -> Project:
    src = tmp_path / "src"
    (src / "app").mkdir(parents=True)
    (src / "app" / "__init__.py").write_text("")
    (src / "app" / "core.py").write_text(CORE)
    (src / "app" / "user.py").write_text(USER)
    (tmp_path / "probe.py").write_text(PROBE)
    reg = tmp_path / "reg"
    reg.mkdir()
    (reg / "931.yaml").write_text(RECIPE + (PARTIAL if request.param == "partial" else ""))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRTOGGLE_", "SGLANG_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(src)])
    env["PRTOGGLE_YAML_PATH"] = str(reg)
    env["PRTOGGLE_WARM"] = "0"
    return Project(root=tmp_path, env=env)


def is_partial(project: Project) -> bool:
    return "not_reverted" in (project.root / "reg" / "931.yaml").read_text()


def test_run_lands_the_names_in_the_child_and_its_spawned_grandchild(project: Project) -> None:
    done = project.prtoggle("run", "-r", "reg:931", "--", sys.executable, "probe.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "child 4096 4096 False 4098 base",
        "grandchild 4096 4096 False 4098 base",
    ]
    partial_lines = [line for line in done.stderr.splitlines() if "partial" in line]
    if not is_partial(project):
        assert partial_lines == []
        return
    # said once, by the parent; the child, the grandchild and multiprocessing's resource
    # tracker stay quiet (issue 26.10)
    assert partial_lines == [f"prtoggle: PR 931 reverted in part ({NOTE})"]


def test_whole_only_refuses_a_partial_revert_before_starting_anything(project: Project) -> None:
    probe = [sys.executable, "-c", "print('ran')"]
    for args in (["run", "--whole-only", "-r", "931"], ["bisect", "--whole-only", "-r", "931"]):
        done = project.prtoggle(*args, "--", *probe)
        if not is_partial(project):
            assert done.returncode in (0, 1), done.stderr
            continue
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (
            f"error: -r: PR 931 (reg/931) is a partial revert ({NOTE}), and only whole "
            "reverts are wanted here (PRTOGGLE_WHOLE_ONLY=1 or --whole-only); leave PR 931 "
            "out, or accept partial reverts\n"
        )
    project.env["PRTOGGLE_WHOLE_ONLY"] = "1"
    done = project.prtoggle("run", "-r", "931", "--", *probe)
    assert done.returncode == (2 if is_partial(project) else 0), done.stderr


def test_show_and_list_say_what_a_revert_changes_and_what_it_leaves(project: Project) -> None:
    shown = project.prtoggle("show", "931", "--collection", "reg")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "  names:     app.core: define LIMIT, _old_helper; remove new_helper" in lines
    assert "  names:     app.core.Child: remove forward" in lines
    assert "- forward (removed)" in lines
    record = json.loads(project.prtoggle("list", "--collection", "reg", "--json").stdout)[0]
    listed = project.prtoggle("list", "--collection", "reg").stdout.splitlines()
    if not is_partial(project):
        assert (record["partial"], record["not_reverted"]) == (False, [])
        assert "partial" not in shown.stdout and "(partial)" not in listed[1]
        return
    assert lines[lines.index("  partial:   1 change not reverted:") + 1] == (
        "             app/core.py:9 decorator of compute changed"
    )
    assert (record["partial"], record["not_reverted"]) == (
        True,
        [
            {
                "file": "app/core.py",
                "line": 9,
                "reason": "decorator of compute changed",
                "code": "def compute(x):",
            }
        ],
    )
    assert listed[1].endswith("yes      (partial) a helper, a constant and an override")


def test_bisect_marks_an_answer_resting_on_a_partial_revert(project: Project) -> None:
    command = textwrap.dedent(
        """\
        import sys, app.core
        sys.exit(1 if app.core.LIMIT == 4096 else 0)
        """
    )
    done = project.prtoggle("bisect", "-r", "reg:931", "--", sys.executable, "-c", command)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "culprit: 931 (attribute, 2 runs)" in done.stdout.splitlines()
    marked = (
        "partial: the revert of 931 leaves some changes of the fix as they are; the answer "
        "rests on a partial revert"
    )
    assert (marked in done.stdout.splitlines()) == is_partial(project)


def test_coverage_marks_a_fix_whose_revert_is_partial(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    from prtoggle.cli.coverage_report import print_report
    from prtoggle.commands.coverage import CoverageReport, RecipeCoverage, SuiteRun
    from prtoggle.pytest_plugin.outcomes import NodeOutcome
    from prtoggle.recipes.schema import load_recipe

    fix = load_recipe(project.root / "reg" / "931.yaml")
    plain = SuiteRun(
        prs=(), outcomes={"t.py::t": NodeOutcome("passed")}, collect_errors={},
        seconds=1.0, exit_code=0,
    )  # fmt: skip
    reverted = SuiteRun(
        prs=(931,), outcomes={"t.py::t": NodeOutcome("failed")}, collect_errors={},
        seconds=1.0, exit_code=1,
    )  # fmt: skip
    entry = RecipeCoverage(recipe=fix, run=reverted, cells={"t.py::t": "guards"})
    report = CoverageReport(command=("pytest",), plain=plain, recipes=(entry,), seconds=2.0)
    record = report.to_json()[0]
    print_report(report)
    lines = capsys.readouterr().out.splitlines()
    if not is_partial(project):
        assert (record["partial"], record["not_reverted"]) == (False, [])
        assert lines[1] == "931  reg         1       t.py::t"
        return
    assert (record["partial"], record["not_reverted"]) == (
        True,
        ["app/core.py:9 decorator of compute changed"],
    )
    assert lines[1] == "931  reg (partial)  1       t.py::t"
    assert lines[-1] == (
        "partial reverts (some changes of the fix stay; `prtoggle show` lists them): reg/931"
    )

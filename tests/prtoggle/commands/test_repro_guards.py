"""Tests for `prtoggle repro PR` on a recipe with guards: real prtoggle and pytest children."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from prtoggle.commands.coverage_runs import SuiteRun
from prtoggle.commands.repro_guards import GuardOutcome, GuardResult, guard_outcome
from prtoggle.pytest_plugin.outcomes import NodeOutcome

CORE = """\
def width(n):
    if n < 0:
        raise ValueError(f"negative width {n}")
    return n * 2
"""
TESTS = """\
import pytest
from toypkg.core import width

def test_negative_is_refused():
    with pytest.raises(ValueError):
        width(-1)

def test_double():
    assert width(2) == 4

def test_negative_message():
    assert width(-3) == -6, "no error for a negative width"
"""
RECIPE = """\
pr: 90101
title: refuse negative widths
patches:
  - target: toypkg.core.width
    edits:
      - match: |
          if n < 0:
              raise ValueError(f"negative width {{n}}")
        replacement: ""
guards:
{guards}
"""
REPRODUCES = "test/unit/test_core.py::test_negative_is_refused"
PASSES_REVERTED = "test/unit/test_core.py::test_double"
FAILS_FIXED = "test/unit/test_core.py::test_negative_message"


@dataclass(frozen=True)
class Checkout:
    """A fix's repository: its package under src/, its tests under test/, its recipe."""

    root: Path
    recipes: Path

    def write_recipe(self, *guards: str, extra: str = "") -> None:
        lines = "\n".join(f"  - {guard}" for guard in guards)
        text = RECIPE.format(guards=lines) + extra
        (self.recipes / "90101.yaml").write_text(text, encoding="utf-8")

    def repro(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PRTOGGLE_YAML_PATH": str(self.recipes), "COLUMNS": "100", **extra}
        command = ["prtoggle", "repro", "90101", "--source-root", str(self.root / "src"), *args]
        return subprocess.run(
            command,
            check=False,
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
            timeout=300,
        )


@pytest.fixture
def checkout(tmp_path: Path) -> Checkout:
    root = tmp_path / "repo"
    (root / "src" / "toypkg").mkdir(parents=True)
    (root / "src" / "toypkg" / "__init__.py").write_text("")
    (root / "src" / "toypkg" / "core.py").write_text(CORE)
    (root / "test" / "unit").mkdir(parents=True)
    (root / "test" / "unit" / "test_core.py").write_text(TESTS)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    return Checkout(root, recipes)


def test_a_guard_that_passes_fixed_and_fails_reverted_reproduces(checkout: Checkout) -> None:
    checkout.write_recipe(REPRODUCES)
    done = checkout.repro("--tests", str(checkout.root))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == "PR 90101 (recipes/90101): its 1 guard"
    assert lines[2].split() == ["GUARD", "FIXED", "REVERTED", "RESULT"]
    assert lines[3].split("  ")[0] == REPRODUCES
    assert " passes  fails: Failed: DID NOT RAISE" in lines[3]
    assert lines[3].endswith("  reproduced")
    assert lines[-1].startswith("1 of 1 guards reproduced (fixed ")
    assert all(len(line) <= 100 for line in lines)


def test_the_plugin_is_loaded_where_pytest_would_not_autoload_it(checkout: Checkout) -> None:
    checkout.write_recipe(REPRODUCES)
    done = checkout.repro(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[3].endswith("  reproduced")


def test_guards_that_do_not_reproduce_are_said_as_such(checkout: Checkout) -> None:
    checkout.write_recipe(REPRODUCES, PASSES_REVERTED, FAILS_FIXED)
    done = checkout.repro("--json")  # --tests defaults to the working directory
    assert done.returncode == 1, done.stdout + done.stderr
    [record] = json.loads(done.stdout)
    verdicts = {guard["guard"]: guard["verdict"] for guard in record["guards"]}
    assert verdicts == {
        REPRODUCES: "reproduced",
        PASSES_REVERTED: "passes reverted",
        FAILS_FIXED: "fails fixed",
    }
    fails_fixed = record["guards"][2]
    assert fails_fixed["fixed"] == {
        "outcome": "failed",
        "error": "ValueError: negative width -3",
    }
    assert fails_fixed["reverted"] == {"outcome": "passed", "error": None}
    assert record["reproduced"] is False


def test_a_guard_failing_otherwise_than_expect_fails_differently(checkout: Checkout) -> None:
    checkout.write_recipe(REPRODUCES, extra='expect: "NaNDetected"\n')
    done = checkout.repro()
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[3].endswith("  fails differently")


def test_a_missing_guard_file_is_one_error_line_naming_it_and_the_tests_dir(
    checkout: Checkout, tmp_path: Path
) -> None:
    checkout.write_recipe(REPRODUCES)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = checkout.repro("--tests", str(elsewhere))
    recipe = checkout.recipes / "90101.yaml"
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"error: guard test/unit/test_core.py of recipes/90101 ({recipe}) does not exist "
        f"under {elsewhere}; expected the fix's tests there (--tests DIR: a checkout at the "
        "fix's commit) (see `prtoggle repro --help`)\n"
    )


def test_a_partial_recipe_says_why_the_failure_may_not_reproduce_before_the_table(
    checkout: Checkout,
) -> None:
    partial = (
        "not_reverted:\n  - file: toypkg/data.json\n    line: 1\n    reason: not Python source\n"
    )
    checkout.write_recipe(REPRODUCES, extra=partial)
    done = checkout.repro()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[2] == (
        "partial: the failure may not reproduce because toypkg/data.json:1 not Python source"
    )
    assert lines[3].split() == ["GUARD", "FIXED", "REVERTED", "RESULT"]


def test_a_guard_naming_a_file_fails_when_any_of_its_tests_fails() -> None:
    run = SuiteRun(
        prs=(),
        outcomes={
            "t/test_a.py::test_x": NodeOutcome("passed"),
            "t/test_a.py::test_y[1]": NodeOutcome("failed", "KeyError: 'k'\nmore"),
            "t/test_b.py::test_z": NodeOutcome("failed", "OSError: no"),
        },
        collect_errors={"t/test_c.py": "ModuleNotFoundError: No module named 'p.new'"},
        seconds=0.1,
        exit_code=1,
    )
    assert guard_outcome("t/test_a.py", run).describe() == "fails: KeyError: 'k'"
    assert guard_outcome("t/test_a.py::test_x", run).describe() == "passes"
    assert guard_outcome("t/test_a.py::test_y", run).describe() == "fails: KeyError: 'k'"
    assert guard_outcome("t/test_c.py::test_w", run).describe() == (
        "fails: ModuleNotFoundError: No module named 'p.new'"
    )
    assert guard_outcome("t/test_d.py::test_v", run).describe() == (
        "not run: no such test in t/test_d.py"
    )


def test_a_guard_naming_no_test_is_not_run_and_the_others_still_run(checkout: Checkout) -> None:
    checkout.write_recipe(REPRODUCES, "test/unit/test_core.py::test_gone")
    done = checkout.repro()
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[3].endswith("  reproduced")
    assert lines[4].split()[:4] == ["test/unit/test_core.py::test_gone", "not", "run:", "no"]
    assert lines[4].endswith("  not run")
    gone = "test/unit/test_core.py::test_gone reverted: no such test in test/unit/test_core.py"
    assert gone in lines


def test_guards_that_never_import_the_fixs_code_say_no_revert_landed(checkout: Checkout) -> None:
    (checkout.root / "test" / "unit" / "test_other.py").write_text("def test_ok():\n    pass\n")
    checkout.write_recipe("test/unit/test_other.py::test_ok")
    done = checkout.repro()
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[3].endswith("  passes reverted")
    assert lines[4] == "the guards never import the code of recipes/90101: no revert landed"


@pytest.mark.parametrize(
    ("fixed", "reverted", "verdict"),
    [
        (GuardOutcome("passed"), GuardOutcome("failed", "E: x"), "reproduced"),
        (GuardOutcome("error", "E: import"), GuardOutcome("revert failed", "why"), "fails fixed"),
        (GuardOutcome("passed"), GuardOutcome("revert failed", "why"), "revert failed"),
        (GuardOutcome("passed"), GuardOutcome("skipped"), "passes reverted"),
        (GuardOutcome("not run", "why"), GuardOutcome("failed", "E: x"), "not run"),
    ],
)
def test_a_guard_that_fails_fixed_is_said_so_before_what_its_reverted_run_did(
    fixed: GuardOutcome, reverted: GuardOutcome, verdict: str
) -> None:
    assert GuardResult("t/test_a.py::test_x", fixed, reverted).verdict == verdict

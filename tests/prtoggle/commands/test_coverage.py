"""Tests for commands.coverage: the fix x test matrix from real pytest runs and reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_fakes import (
    ANSWER_FIX,
    BROKEN_FIX,
    FIRST_HALF_FIX,
    HARMLESS_FIX,
    SECOND_HALF_FIX,
    FakeProject,
    fake_project,
)
from coverage_fakes import pytest_command, write_suite

from prtoggle.commands.coverage import compare, run_coverage
from prtoggle.commands.coverage_runs import SuiteRun, run_suite
from prtoggle.errors import RunnerError
from prtoggle.pytest_plugin.outcomes import NodeOutcome
from prtoggle.recipes.registry import default_registry

__all__ = ["fake_project"]

ANSWER = "test_target.py::test_answer"


def suite_run(
    outcomes: dict[str, str],
    *,
    collect_errors: dict[str, str] | None = None,
    error: str | None = None,
) -> SuiteRun:
    return SuiteRun(
        prs=(1,),
        outcomes={test: NodeOutcome(outcome) for test, outcome in outcomes.items()},  # type: ignore[arg-type]
        collect_errors=collect_errors or {},
        seconds=1.0,
        exit_code=1,
        error=error,
    )


def test_a_test_guards_a_fix_when_it_passes_plain_and_fails_or_errors_reverted() -> None:
    plain = suite_run({"a.py::t1": "passed", "a.py::t2": "passed", "a.py::t3": "passed"})
    reverted = suite_run({"a.py::t1": "failed", "a.py::t2": "error", "a.py::t3": "passed"})
    assert compare(plain, reverted) == {
        "a.py::t1": "guards",
        "a.py::t2": "guards",
        "a.py::t3": "passes",
    }


def test_tests_that_fail_or_skip_plain_are_never_guards() -> None:
    plain = suite_run(
        {"a.py::t1": "failed", "a.py::t2": "error", "a.py::t3": "skipped", "a.py::t4": "xfailed"}
    )
    reverted = suite_run(
        {"a.py::t1": "failed", "a.py::t2": "failed", "a.py::t3": "failed", "a.py::t4": "failed"}
    )
    assert compare(plain, reverted) == {
        "a.py::t1": "plain-fails",
        "a.py::t2": "plain-fails",
        "a.py::t3": "skipped",
        "a.py::t4": "skipped",
    }


def test_a_module_that_no_longer_imports_reverted_counts_its_tests_as_guards() -> None:
    plain = suite_run({"sub/a.py::t1": "passed", "sub/b.py::t2": "passed"})
    reverted = suite_run({}, collect_errors={"sub/a.py": "AssertionError: gone"})
    assert compare(plain, reverted) == {"sub/a.py::t1": "guards", "sub/b.py::t2": "not-run"}


def test_a_reverted_run_without_a_report_marks_every_test() -> None:
    plain = suite_run({"a.py::t1": "passed"})
    assert compare(plain, suite_run({}, error="exit status 78")) == {"a.py::t1": "run-failed"}


def test_run_suite_reads_each_outcome_from_the_plugins_report(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path)
    run = run_suite(pytest_command(suite), prs=(FIRST_HALF_FIX,), timeout=120)
    assert run.error is None
    assert {test.split("/")[-1]: outcome.outcome for test, outcome in run.outcomes.items()} == {
        "test_target.py::test_answer": "passed",
        "test_target.py::test_first_half": "failed",
        "test_target.py::test_second_half": "passed",
        "test_target.py::test_always_fails": "failed",
    }
    (collector,) = run.collect_errors
    assert collector.endswith("test_import_time.py")
    first_half = next(test for test in run.outcomes if test.endswith("test_first_half"))
    assert str(run.outcomes[first_half].error).startswith("AssertionError: assert 0 == 21")


def test_run_coverage_builds_the_matrix_and_keeps_plain_failures_apart(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path)
    registry = default_registry()
    fixes = [
        registry.get(pr)
        for pr in (ANSWER_FIX, FIRST_HALF_FIX, SECOND_HALF_FIX, HARMLESS_FIX, BROKEN_FIX)
    ]
    report = run_coverage(fixes, pytest_command(suite), jobs=2, timeout=120)
    guarded = {
        entry.recipe.pr: [t.split("::")[-1] for t in entry.guarded_by] for entry in report.recipes
    }
    assert guarded == {
        ANSWER_FIX: ["test_answer"],
        FIRST_HALF_FIX: ["test_imported", "test_first_half"],
        SECOND_HALF_FIX: ["test_second_half"],
        HARMLESS_FIX: [],
        BROKEN_FIX: [],
    }
    assert [t.split("::")[-1] for t in report.plain_failing] == ["test_always_fails"]
    assert [entry.recipe.pr for entry in report.unguarded()] == [HARMLESS_FIX, BROKEN_FIX]
    broken = report.recipes[-1]
    assert broken.run.error is not None
    assert broken.run.error.startswith(
        f"the revert of PR {BROKEN_FIX} (registry) did not apply: "
        f"PR {BROKEN_FIX} could not be reverted when prtoggle_fake_target was imported"
    )
    assert set(broken.cells.values()) == {"run-failed", "plain-fails"}


def test_a_plain_run_without_a_report_is_an_error(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    registry = default_registry()
    command = ["python", "-c", "pass"]
    with pytest.raises(
        RunnerError,
        match=r"^the plain run of 'python -c pass' wrote no report: exit status 0, no report; "
        "last line: no output$",
    ):
        run_coverage([registry.get(ANSWER_FIX)], command, jobs=1, timeout=60)

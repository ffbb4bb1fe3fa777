"""Tests for the plugin's JSON outcome report (--prtoggle-report), written and read."""

from __future__ import annotations

from pathlib import Path

import pytest

from prtoggle.errors import PrToggleError
from prtoggle.pytest_plugin.outcomes import NodeOutcome, read_report

OUTCOMES = """
import pytest


@pytest.fixture
def broken_setup():
    raise RuntimeError("setup broke")


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")


def test_passes():
    pass


def test_fails():
    raise ValueError("wrong value 7")


def test_setup_error(broken_setup):
    pass


def test_teardown_error(broken_teardown):
    pass


def test_skipped():
    pytest.skip("not here")


@pytest.mark.xfail(reason="known")
def test_xfailed():
    raise ValueError("known")


@pytest.mark.xfail(reason="known")
def test_xpassed():
    pass
"""

EXPECTED = {
    "test_outcomes.py::test_passes": NodeOutcome("passed"),
    "test_outcomes.py::test_fails": NodeOutcome("failed", "ValueError: wrong value 7"),
    "test_outcomes.py::test_setup_error": NodeOutcome("error", "RuntimeError: setup broke"),
    "test_outcomes.py::test_teardown_error": NodeOutcome("error", "RuntimeError: teardown broke"),
    "test_outcomes.py::test_skipped": NodeOutcome("skipped"),
    "test_outcomes.py::test_xfailed": NodeOutcome("xfailed"),
    "test_outcomes.py::test_xpassed": NodeOutcome("xpassed"),
}


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    pytester.makepyfile(test_outcomes=OUTCOMES, test_broken="raise ImportError('no module x')\n")
    return pytester


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_the_report_holds_every_tests_outcome_and_failed_collectors(
    suite: pytest.Pytester, xdist: list[str]
) -> None:
    path = suite.path / "report.json"
    suite.runpytest_subprocess(
        "--prtoggle-report", str(path), "--continue-on-collection-errors", *xdist
    )
    report = read_report(path)
    assert dict(report.tests) == EXPECTED
    assert dict(report.collect_errors) == {"test_broken.py": "ImportError: no module x"}


def test_no_report_is_written_without_the_option(suite: pytest.Pytester) -> None:
    suite.runpytest_inprocess()
    assert not list(suite.path.glob("*.json"))


def test_a_file_that_is_not_a_report_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text('{"version": 1, "tests": {"a.py::t": {"outcome": "great"}}}')
    with pytest.raises(PrToggleError) as caught:
        read_report(path)
    assert str(caught.value) == (
        f"{path}: not a prtoggle pytest report (ValueError: unknown outcome 'great'); "
        "expected the JSON that `pytest --prtoggle-report FILE` writes"
    )

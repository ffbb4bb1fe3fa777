"""`prtoggle coverage`'s text report on a suite with many failures: the answer first, one
capped list of what was not judged, and the same never-imported note warm or cold."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_fakes import ANSWER_FIX, FakeProject, fake_project
from coverage_fakes import pytest_command, write_suite
from test_cli_coverage import other_engine_collection

__all__ = ["fake_project"]

MANY_FAILURES = """
import pytest


@pytest.mark.parametrize("n", range(30))
def test_broken_before_any_revert(n):
    raise AssertionError(f"broken {n}")
"""

OUTLIVES_THE_SUITE = """
import subprocess
import sys


def test_starts_a_process_that_outlives_the_suite():
    subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(4)"], start_new_session=True
    )
"""


def coverage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prtoggle", "coverage", *args],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_suite_with_many_failures_leads_with_the_answer_and_caps_what_was_not_judged(
    fake_project: FakeProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other_engine_collection(fake_project, monkeypatch)
    suite = write_suite(tmp_path)
    (suite / "test_many.py").write_text(MANY_FAILURES)
    result = coverage("-r", str(ANSWER_FIX), "--", *pytest_command(suite))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        "PR     COLLECTION  GUARDS  GUARDED BY",
        f"{ANSWER_FIX}  registry    1       test_target.py::test_answer",
        f"{ANSWER_FIX}  engine2     0       NONE: the suite never imports its code "
        "(prtoggle_fake_other): no result",
        f"never imported by the suite (no result): engine2/{ANSWER_FIX}",
    ]
    assert lines[5] == "1 of 2 fixes guarded, 1 never imported"
    assert lines[6].startswith("35 tests (31 failing plain); 3 runs in ")
    assert lines[8] == "not judged (31 items):"
    assert lines[9] == (
        "  test_many.py::test_broken_before_any_revert[0]: fails plain: AssertionError: broken 0"
    )
    assert lines[19:] == ["  and 21 more (--json for all)"]
    assert max(len(line) for line in lines) <= 100


@pytest.mark.parametrize("mode", ["--cold", "warm"])
def test_a_process_outliving_the_suite_does_not_hide_that_its_code_was_never_imported(
    fake_project: FakeProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    other_engine_collection(fake_project, monkeypatch)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "test_outlives.py").write_text(OUTLIVES_THE_SUITE)
    modes = [mode] if mode.startswith("--") else []
    result = coverage(*modes, "-r", f"engine2:{ANSWER_FIX}", "--", *pytest_command(suite))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:3] == [
        "PR     COLLECTION  GUARDS  GUARDED BY",
        f"{ANSWER_FIX}  engine2     0       NONE: the suite never imports its code "
        "(prtoggle_fake_other): no result",
        f"never imported by the suite (no result): engine2/{ANSWER_FIX}",
    ]

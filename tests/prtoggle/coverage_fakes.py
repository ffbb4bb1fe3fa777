"""A small pytest suite over the fake target, for `prtoggle coverage` tests."""

from __future__ import annotations

import sys
from pathlib import Path

from cli_fakes import TARGET_MODULE

SUITE = f"""
import {TARGET_MODULE} as target


def test_answer():
    assert target.answer() == 42


def test_first_half():
    assert target.first_half() == 21


def test_second_half():
    assert target.second_half() == 21


def test_always_fails():
    raise AssertionError("broken with every fix in place")
"""

IMPORT_TIME_CHECK = f"""
import {TARGET_MODULE} as target

assert target.first_half() == 21, "first half gone at import"


def test_imported():
    pass
"""


def write_suite(root: Path) -> Path:
    """A suite directory with its own pytest.ini (so its rootdir is itself)."""
    suite = root / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "test_target.py").write_text(SUITE)
    (suite / "test_import_time.py").write_text(IMPORT_TIME_CHECK)
    return suite


def pytest_command(suite: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", str(suite)]

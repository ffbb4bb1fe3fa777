"""Tests of recipes.authoring.source_readers: the guards that read the package's source text."""

from __future__ import annotations

from prtoggle.recipes.authoring.source_readers import source_readers, source_text_read

RATCHET = """\
import re
import unittest
from pathlib import Path

import app

_ROOT = Path(next(iter(app.__path__)))
_BASELINE = 3


class TestRatchet(unittest.TestCase):
    def test_call_sites_match_the_baseline(self):
        count = sum(
            len(re.findall(r"override\\(", path.read_text())) for path in _ROOT.rglob("*.py")
        )
        self.assertEqual(count, _BASELINE)

    def test_scale(self):
        from app.core import scale

        self.assertEqual(scale(2), 4)
"""

FIXTURE_NEXT_TO_THE_TEST = """\
import json
from pathlib import Path

from app.core import load


def test_load():
    data = json.loads((Path(__file__).parent / "data.json").read_text())
    assert load(data) == 1
"""

INSPECTS = """\
import inspect

from app import core


def _source():
    return inspect.getsource(core.scale)


class TestSource:
    def test_no_debug_print(self):
        assert "print(" not in _source()
"""


def test_a_test_reading_files_under_a_package_s_path_reads_its_source_text() -> None:
    guard = "test/unit/test_ratchet.py::TestRatchet::test_call_sites_match_the_baseline"
    assert source_text_read(RATCHET, guard) == "`read_text` of files under `app.__path__`"


def test_another_test_of_the_same_file_that_reads_no_file_is_not_counted() -> None:
    assert source_text_read(RATCHET, "test/unit/test_ratchet.py::TestRatchet::test_scale") is None


def test_a_whole_file_guard_counts_every_test_of_the_file() -> None:
    found = source_text_read(RATCHET, "test/unit/test_ratchet.py")
    assert found == "`read_text` of files under `app.__path__`"


def test_a_fixture_read_next_to_the_test_file_is_not_the_package_s_source() -> None:
    assert source_text_read(FIXTURE_NEXT_TO_THE_TEST, "test/unit/test_load.py::test_load") is None


def test_inspect_getsource_reached_through_a_module_helper_reads_source_text() -> None:
    guard = "test/unit/test_source.py::TestSource::test_no_debug_print"
    assert source_text_read(INSPECTS, guard) == "`inspect.getsource`"


def test_source_readers_keeps_the_guards_that_read_and_says_how() -> None:
    guards = [
        "test/unit/test_ratchet.py::TestRatchet::test_call_sites_match_the_baseline",
        "test/unit/test_ratchet.py::TestRatchet::test_scale",
    ]
    assert source_readers(guards, RATCHET) == [
        (guards[0], "`read_text` of files under `app.__path__`")
    ]
    assert source_readers(guards, None) == []
    assert source_readers(guards, "def broken(:\n") == []

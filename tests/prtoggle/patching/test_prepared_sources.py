"""Tests for patching.prepared_sources and the per-file facts it fills ahead: a file's module
scope, its whole compile and its symbol table, each kept per version of the file."""

from __future__ import annotations

import os
from pathlib import Path

from prtoggle.patching.enclosing import module_table
from prtoggle.patching.freshness import compiled_file
from prtoggle.patching.module_scope import module_scope
from prtoggle.patching.prepared_sources import MOST_FILES, prepare_sources

SOURCE = "import os\n\nLIMIT = 3\n\n\nclass Box:\n    def size(self):\n        return LIMIT\n"


def test_a_module_scope_is_read_again_when_its_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_text("A = 1\n")
    assert module_scope(str(path)).bound == {"A"}  # type: ignore[union-attr]
    path.write_text("A = 1\nB = 2\n")
    os.utime(path, ns=(1, 1))  # another version even on a coarse clock
    assert module_scope(str(path)).bound == {"A", "B"}  # type: ignore[union-attr]


def test_prepared_files_are_found_read_by_the_revert_that_needs_them(tmp_path: Path) -> None:
    path = tmp_path / "prepared_box.py"
    path.write_text(SOURCE)
    assert prepare_sources([str(path), str(path)]) == 1
    compiled, tables = compiled_file.cache_info(), module_table.cache_info()
    assert compiled_file(str(path), SOURCE) is not None
    assert module_table(SOURCE, str(path)) is not None
    assert compiled_file.cache_info().hits == compiled.hits + 1
    assert compiled_file.cache_info().misses == compiled.misses
    assert module_table.cache_info().hits == tables.hits + 1
    assert module_table.cache_info().misses == tables.misses


def test_files_that_cannot_be_read_or_parsed_are_left_out(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    good = tmp_path / "good.py"
    good.write_text(SOURCE)
    assert prepare_sources([str(tmp_path / "missing.py"), str(broken), str(good)]) == 1


def test_at_most_most_files_are_prepared_in_one_call(tmp_path: Path) -> None:
    paths = []
    for number in range(MOST_FILES + 3):
        path = tmp_path / f"many_{number}.py"
        path.write_text(f"VALUE = {number}\n")
        paths.append(str(path))
    assert prepare_sources(paths) == MOST_FILES

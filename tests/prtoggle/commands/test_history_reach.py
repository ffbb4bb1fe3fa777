"""history_reach: which commits of a real repository's range change code a run used, judged
from each commit's own diff against a trace of the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from prtoggle.commands.history_reach import (
    MODULE_LEVEL,
    changed_units,
    commits_reaching,
    units_of,
)
from prtoggle.recipes.authoring.history import read_range
from prtoggle.revert.run_trace import RunTrace
from tests.prtoggle.history_fakes import HistoryRepo, history_repo

SOURCE = """\
import os

LIMIT = 3


@cache
def decorated(x):
    return x


class Box:
    size: int = 1

    def grow(self):
        def inner():
            return 2

        return inner()

    # a comment in the class body

    class Lid:
        def close(self):
            return 0


def plain():
    return 1


@dataclass(frozen=True)
class Point:
    x: int = 0

    class Inner:
        y: int = 1
"""


@pytest.mark.parametrize(
    ("lines", "units"),
    [
        ([1], {MODULE_LEVEL}),  # import
        ([3], {MODULE_LEVEL}),  # constant
        ([6], {MODULE_LEVEL}),  # a decorator runs at import
        ([7, 8], {"decorated"}),
        ([11, 12], {MODULE_LEVEL, "Box.<body>"}),  # class statement and class attribute
        ([16, 17], {"Box.grow"}),  # a nested def counts as the def around it
        ([19, 20], set()),  # blank and comment-only lines count for nothing
        ([24], {"Box.Lid.close"}),
        ([28], {"plain"}),
        ([31], {MODULE_LEVEL, "Point.<body>"}),  # a class decorator shapes generated methods
        ([33], {MODULE_LEVEL, "Point.<body>"}),  # a dataclass field
        ([36], {MODULE_LEVEL, "Point.Inner.<body>"}),  # the innermost class
        ([], set()),
    ],
)
def test_changed_lines_fall_in_module_level_code_or_in_a_def(
    lines: list[int], units: set[str]
) -> None:
    assert units_of(SOURCE, lines) == units


def test_a_source_that_does_not_parse_counts_as_module_level() -> None:
    assert units_of("def f(:\n    pass\n", [2]) == {MODULE_LEVEL}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> HistoryRepo:
    repo = history_repo(tmp_path_factory.mktemp("reach") / "repo")
    repo.edit("python/calc/core.py", "def double(x):", "SCALE = 1\n\n\ndef double(x):")
    repo.commit("feat: a scale constant (#700)")
    repo.write("python/calc/extra.py", "def extra():\n    return 1\n")
    repo.commit("feat: an extra module (#701)")
    return repo


def _trace(repo: HistoryRepo, *, ran: set[str], modules: tuple[str, ...]) -> RunTrace:
    root = repo.root / "python" / "calc"
    files = {str(root / name) for name in modules}
    return RunTrace(modules=files, functions={str(root / "core.py"): ran}, processes=1)


def test_only_commits_changing_run_functions_or_module_level_code_of_imported_modules_reach(
    repo: HistoryRepo,
) -> None:
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    # a module's own code runs as `<module>`: that is not a function the run ran
    trace = _trace(repo, ran={"absval", "<module>"}, modules=("__init__.py", "core.py"))
    reach = commits_reaching(history, trace)
    why = {entry.commit.subject: (entry.reaches, entry.why) for entry in reach.commits}
    assert why["fix: absval of negatives (#200)"] == (
        True,
        "changes calc/core.py: absval, which the run ran",
    )
    assert why["refactor: triple v3 (#303)"] == (
        False,
        "changes only functions the run did not run",
    )
    assert why["chore: note 2 (#102)"] == (
        False,
        "changes only comments and blank lines the run imported",
    )
    assert why["feat: a scale constant (#700)"] == (
        True,
        "changes module-level code of calc/core.py",
    )
    assert why["feat: an extra module (#701)"] == (False, "changes no module the run imported")
    assert [c.subject for c in reach.reaching] == [
        "fix: absval of negatives (#200)",
        "feat: a scale constant (#700)",
    ]


def test_a_module_the_commit_added_reaches_a_run_that_imported_it(repo: HistoryRepo) -> None:
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    trace = _trace(repo, ran=set(), modules=("core.py", "extra.py"))
    reach = commits_reaching(history, trace)
    why = {entry.commit.subject: entry.why for entry in reach.commits if entry.reaches}
    assert why == {
        "feat: a scale constant (#700)": "changes module-level code of calc/core.py",
        "feat: an extra module (#701)": "adds or deletes calc/extra.py, which the run imported",
    }


def test_a_run_that_imported_nothing_of_the_package_is_reached_by_no_commit(
    repo: HistoryRepo, tmp_path: Path
) -> None:
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    trace = RunTrace(modules={str(tmp_path / "elsewhere.py")}, processes=1)
    assert commits_reaching(history, trace).reaching == []


def test_units_read_before_the_trace_judge_every_commit_as_units_read_after_it(
    repo: HistoryRepo,
) -> None:
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    units = changed_units(history)  # every file any candidate changes, no trace needed
    assert units[(repo.shas["feat: an extra module (#701)"], "calc/extra.py")] is None
    for modules in (("__init__.py", "core.py"), ("core.py", "extra.py")):
        trace = _trace(repo, ran={"absval"}, modules=modules)
        early = commits_reaching(history, trace, units=units)
        late = commits_reaching(history, trace)
        assert [(e.reaches, e.why, e.ran_code) for e in early.commits] == [
            (e.reaches, e.why, e.ran_code) for e in late.commits
        ]
        assert early.located == late.located


def test_a_dataclass_field_change_is_searched_first_when_the_run_made_an_instance(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    start = repo.git("rev-parse", "HEAD").strip()
    fields = "@dataclass\nclass Point:\n    x: int = 0\n"
    repo.write("python/calc/shapes.py", f"from dataclasses import dataclass\n\n\n{fields}")
    repo.commit("feat: a Point (#800)")
    repo.edit("python/calc/shapes.py", "    x: int = 0\n", "    x: int = 0\n    y: int = 0\n")
    repo.commit("feat: Point takes y (#801)")
    history = read_range(repo.root, f"{start}..HEAD", source_dir="python")
    shapes = str(repo.root / "python" / "calc" / "shapes.py")
    made = RunTrace(modules={shapes}, functions={shapes: {"Point.<body>"}}, processes=1)
    entry = commits_reaching(history, made).commits[-1]
    assert (entry.commit.subject, entry.ran_code, entry.why) == (
        "feat: Point takes y (#801)",
        True,
        "changes calc/shapes.py: the fields of Point, whose generated methods the run ran",
    )
    imported = RunTrace(modules={shapes}, processes=1)  # imported, no instance made
    entry = commits_reaching(history, imported).commits[-1]
    assert (entry.ran_code, entry.why) == (False, "changes module-level code of calc/shapes.py")

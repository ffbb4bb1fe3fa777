"""history_probes: the small rules a history search reads its probes by."""

from __future__ import annotations

import datetime
from pathlib import Path

from prtoggle.commands.history_probes import (
    Probe,
    next_untested,
    not_landed_files,
    reproduce_line,
)
from prtoggle.commands.history_verdicts import ProbeRun
from prtoggle.recipes.authoring.history import HistoryCommit, HistoryRecipe


def _commit(*files: str) -> HistoryCommit:
    return HistoryCommit("a" * 40, "fix (#1)", datetime.date(2026, 7, 1), 1, files)


def test_the_next_probe_is_the_untested_index_nearest_the_middle() -> None:
    assert next_untested(0, 8, set()) == 4
    assert next_untested(0, 8, {4}) == 3
    assert next_untested(0, 8, {3, 4}) == 5
    assert next_untested(3, 4, set()) is None


def test_the_files_a_run_says_did_not_land_are_those_the_commits_change() -> None:
    note = (
        "PR 1 not reverted in process 7: names of pkg.moe.runner cannot be reverted: "
        "ImportError: cannot import name 'x' from 'pkg.layers'"
    )
    run = ProbeRun("other", "not reverted", 78, 1.0, note)
    probe = Probe("reverting 1 commit", ("a" * 40,), "skip", (run,))
    commits = [_commit("pkg/moe/runner.py", "pkg/layers/__init__.py", "pkg/other.py")]
    assert not_landed_files(probe, commits) == {"pkg/moe/runner.py", "pkg/layers/__init__.py"}


def test_the_reproduce_line_quotes_what_the_shell_would_split(tmp_path: Path) -> None:
    folder = tmp_path / "a b" / "git-commit-aaaa"
    recipe = HistoryRecipe(folder, "git-commit-aaaa:1")
    line = reproduce_line(recipe, ["python", "-c", "print(1)"])
    assert line == (
        f"PRTOGGLE_YAML_PATH='{folder}' prtoggle run -r git-commit-aaaa:1 -- python -c 'print(1)'"
    )
    assert reproduce_line(HistoryRecipe(folder, ""), ["true"]) == ""

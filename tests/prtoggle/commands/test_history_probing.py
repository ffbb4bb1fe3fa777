"""history_probing: which import failures of a probe's run are the regression, and which
only show that the probe's revert does not hold together (on a real repository's history)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from prtoggle.commands.bisect_history import HistoryBisect
from prtoggle.commands.history_probes import Tier
from prtoggle.commands.history_verdicts import ProbeRun
from prtoggle.recipes.authoring import from_diff
from prtoggle.recipes.authoring.history import read_range
from tests.prtoggle.history_fakes import HistoryRepo, history_repo

BAD = ProbeRun("bad", "ModuleNotFoundError: No module named 'calc.core'", 1, 0.5)


def _output(missing: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/site/test/test_calc.py", line 4, in test_absval\n'
        '  File "/site/python/calc/core.py", line 9, in absval\n'
        f"ModuleNotFoundError: No module named '{missing}'\n"
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> HistoryRepo:
    return history_repo(tmp_path_factory.mktemp("coherence") / "repo")


@pytest.mark.parametrize(
    ("missing", "reverted", "expected"),
    [
        ("calc.core", ({"calc/core.py"}, set()), ("bad", "")),
        (
            "calc.core",
            (set(), {"calc/core.py"}),
            (
                "other",
                "incoherent: the revert takes module calc.core, which calc/core.py "
                "(reverted only in part by this probe) imports",
            ),
        ),
        (
            "calc.core",
            (set(), set()),
            (
                "other",
                "incoherent: the revert takes module calc.core, which calc/core.py "
                "(not reverted by this probe) imports",
            ),
        ),
        (
            "calc.gone",
            ({"calc/core.py"}, set()),
            (
                "other",
                "incoherent: the reverted code imports calc.gone, which the package at the "
                "range's head does not have (a commit of the range deleted or moved it; a "
                "revert cannot bring a module back)",
            ),
        ),
        ("numpy.gone", ({"calc/core.py"}, set()), ("bad", "")),  # not the package's module
    ],
    ids=["reverted-whole", "reverted-in-part", "not-reverted", "gone-at-head", "other-package"],
)
def test_an_import_failure_counts_only_where_the_probe_reverted_the_importer_whole(
    repo: HistoryRepo,
    tmp_path: Path,
    missing: str,
    reverted: tuple[set[str], set[str]],
    expected: tuple[str, str],
) -> None:
    whole, partly = reverted  # the files the probe reverted whole, and in part
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    search = HistoryBisect(history, ("python", "-m", "pytest"), cache=tmp_path)
    judged = search._coherent(BAD, _output(missing), whole, partly)
    assert (judged.outcome, judged.note) == expected


@pytest.mark.parametrize(
    ("bounds", "culprits"),
    [
        ((1, 2, 3), [2, 1]),  # fails: its own commit; passes: the oldest failing one
        ((0, 1, 2), [1, 0]),  # passes with none failing yet: the whole tier's commit 0
        ((1, 2, 5), [1]),  # fails: more to search; passes: commit 1 is the culprit
    ],
)
def test_a_probe_that_closes_the_bounds_has_the_culprit_of_either_outcome_drafted_alone(
    repo: HistoryRepo, tmp_path: Path, bounds: tuple[int, int, int], culprits: list[int]
) -> None:
    bad, index, good = bounds  # the probe of `index` runs between these
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    search = HistoryBisect(history, ("python", "-m", "pytest"), cache=tmp_path)
    candidates = list(history.candidates)
    search._tier, search._wider = Tier("candidates", candidates), []
    search._plan_after(candidates, index, bad=bad, good=good, skipped=set())
    alone = [key for key, _ in search._ahead.queued if key.startswith("alone:")]
    assert alone == [f"alone:{candidates[i].sha}" for i in culprits]
    whole_tier = any(
        key.startswith(f"suffix:{candidates[0].sha}:") for key, _ in search._ahead.queued
    )
    assert whole_tier == (bad == 0)
    useful = search._ahead.useful_after  # a failing run: this commit; a passing one: `bad`'s
    assert f"alone:{candidates[bad].sha}" not in useful["bad"]
    assert (f"alone:{candidates[index].sha}" in useful["bad"]) == (index + 1 == good)
    assert (f"alone:{candidates[bad].sha}" in useful["good"]) == (index - 1 == bad)


@pytest.mark.slow
def test_a_search_keeps_none_of_its_module_comparisons_once_it_ends(
    repo: HistoryRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process exiting with them spent a second freeing them (a real sglang range)."""
    monkeypatch.chdir(repo.root)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(repo.root / "python"), *sys.path]))
    history = read_range(repo.root, f"{repo.shas['start']}..HEAD", source_dir="python")
    command = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test/test_calc.py")
    search = HistoryBisect(history, command, cache=tmp_path, warm=False)
    drafted: list[int] = []
    real = from_diff.compare_module

    def counting(pre: str, post: str, **kwargs: object) -> object:
        drafted.append(from_diff.comparisons_kept())
        return real(pre, post, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(from_diff, "compare_module", counting)
    answer = search.run("ordered")
    assert [c.subject for c in answer.culprits] == ["fix: absval of negatives (#200)"]
    assert drafted and max(drafted) > 0  # comparisons were kept while it searched
    assert from_diff.comparisons_kept() == 0

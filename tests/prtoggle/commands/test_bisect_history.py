"""`prtoggle bisect --git`: a real repository's history bisected by reverting commits in the
code the command imports, in real processes (the culprit, the cache, what cannot be ruled
out, a flaky command)."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.prtoggle.history_fakes import HistoryRepo, history_repo
from tests.prtoggle.process_checks import assert_signal_ends_all, parent_of

FIX = "fix: absval of negatives (#200)"


def _pytest(test_file: str) -> tuple[str, ...]:
    return ("--", "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file)


PYTEST = _pytest("test/test_calc.py")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> HistoryRepo:
    return history_repo(tmp_path_factory.mktemp("history") / "repo")


def bisect(repo: HistoryRepo, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return repo.prtoggle("bisect", "--git", f"{repo.shas['start']}..HEAD", *args, cache=cache)


def test_the_commit_a_test_depends_on_is_named_confirmed_alone_and_drafted_once(
    repo: HistoryRepo, tmp_path: Path
) -> None:
    first = bisect(repo, tmp_path / "cache", *PYTEST)
    assert first.returncode == 0, first.stdout + first.stderr
    fix = repo.shas[FIX]
    lines = first.stdout.splitlines()
    assert lines[
        0
    ] == f"range {repo.shas['start'][:12]}..{repo.git('rev-parse', 'HEAD')[:12]}: " + (
        "19 commits, 17 change Python source under python"
    )
    assert lines[1] == "not candidates: 2 (1 docs-only; 1 test-only)"
    assert f"culprit: {fix[:12]} (#200) fix: absval of negatives, " in first.stdout
    assert f"  sha: {fix}" in lines
    assert "reverted alone: fails as the search did" in lines
    assert "whole revert of the culprit alone: yes" in lines
    assert (
        "failure counted: any failure of the command (not a timeout, crash or skip; "
        "--fingerprint narrows it)"
    ) in lines
    assert (
        "reach: 1 of 17 candidates change code the run used, 1 a function it ran (searched first)"
    ) in lines
    probes = [line for line in lines if line.startswith("probe ")]
    # nothing, everything, at most ceil(log2 17) suffixes, then the culprit alone
    assert len(probes) <= 2 + math.ceil(math.log2(17)) + 1
    drafted = re.search(r"^recipes: (\d+) drafted, 0 from the cache$", first.stdout, re.M)
    assert drafted is not None and int(drafted.group(1)) == len(probes) - 1

    second = bisect(repo, tmp_path / "cache", *PYTEST)
    assert second.returncode == 0
    assert f"recipes: 0 drafted, {drafted.group(1)} from the cache" in second.stdout.splitlines()
    assert f"culprit: {fix[:12]} (#200)" in second.stdout


def test_the_reproduce_command_fails_as_the_search_did_and_json_names_the_commit(
    repo: HistoryRepo, tmp_path: Path
) -> None:
    done = bisect(repo, tmp_path / "cache", "--json", *PYTEST)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert [c["sha"] for c in answer["culprits"]] == [repo.shas[FIX]]
    assert answer["culprits"][0]["pr"] == 200
    assert answer["confirmation"]["verdict"] == "bad"
    assert answer["confirmation"]["whole"] is True
    assert answer["cannot_be_ruled_out"] == []
    assert sorted(c["reason"] for c in answer["not_candidates"]) == ["docs-only", "test-only"]
    assert re.search(r"^probe 1: nothing reverted -> good", done.stderr, re.M)

    reproduce = answer["reproduce"]
    assert reproduce.endswith(" ".join(PYTEST))
    again = subprocess.run(
        ["bash", "-c", reproduce],
        cwd=repo.root,
        env={**_env(repo), "PYTHONPATH": str(repo.root / "python")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 1, again.stdout + again.stderr
    assert "assert -3 == 3" in again.stdout


def test_a_fix_whose_revert_is_partial_cannot_be_ruled_out_and_no_culprit_is_named(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    repo.edit(
        "python/calc/core.py",
        "def absval(x):\n    if x < 0:\n        return -x\n    return x\n",
        "import dataclasses\n\n\ndef _registered(cls):\n    return cls\n\n\n"
        "@_registered\n@dataclasses.dataclass\nclass Config:\n"  # not defined again: listed
        "    negate: bool = False\n\n\n"
        "def absval(x):\n    return -x if x < 0 and Config().negate else x\n",
    )
    start = repo.commit("refactor: absval reads Config (#500)")
    repo.edit("python/calc/core.py", "negate: bool = False", "negate: bool = True")
    repo.edit("python/calc/core.py", "return x * 2", "return x * 2  # by two")
    partial = repo.commit("fix: negate by default (#501)")
    repo.write("python/calc/__init__.py", "# after\n")
    repo.commit("chore: after (#502)")
    done = repo.prtoggle("bisect", "--git", f"{start}..HEAD", *PYTEST, cache=tmp_path / "c")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "culprit:" not in done.stdout
    # the chore reaches nothing the tests run: the fix alone is reverted
    assert (
        "reach: 1 of 2 candidates change code the run used, 1 a function it ran (searched first)"
    ) in done.stdout
    assert re.search(
        rf"^probe 2: reverting 1 commit from {partial[:12]} .*\(partial\) -> skip",
        done.stdout,
        re.M,
    )
    assert f"partial: changes of {partial[:12]} stay (calc/core.py:11: a field of Config" in (
        done.stdout
    )
    assert "cannot be ruled out: 1 commits" in done.stdout
    assert f"  {partial[:12]} (#501) fix: negate by default" in done.stdout


def test_a_culprit_whose_revert_conflicts_with_a_newer_commit_is_found_and_reproduced_by_a_suffix(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    repo.edit("python/calc/core.py", "        return -x\n", "        return -1 * x\n")
    newer = repo.commit("refactor: negate by multiplying (#600)")
    done = bisect(repo, tmp_path / "c", *PYTEST)
    assert done.returncode == 0, done.stdout + done.stderr
    fix = repo.shas[FIX]
    assert f"culprit: {fix[:12]} (#200)" in done.stdout
    assert "reverted alone: inconclusive (" in done.stdout
    assert (
        f"git-{repo.git('rev-parse', 'HEAD')[:12]}-from-{fix[:12]}"
        in done.stdout.split("reproduce: ")[1]
    )

    attribute = repo.prtoggle(
        "bisect",
        "--git",
        f"{repo.shas['start']}..HEAD",
        "--mode",
        "attribute",
        *PYTEST,
        cache=tmp_path / "c",
    )
    assert attribute.returncode == 1, attribute.stdout + attribute.stderr
    assert "cannot be ruled out: " in attribute.stdout
    assert f"  {fix[:12]} (#200) fix: absval of negatives" in attribute.stdout
    assert newer[:12] not in attribute.stdout.split("cannot be ruled out: ")[1].split("decided")[0]


def test_a_culprit_the_trace_cannot_see_is_found_by_widening_the_search_to_every_candidate(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    repo.edit("python/calc/core.py", "return x * 2\n", "return 2 * x\n")
    double = repo.commit("refactor: double (#800)")
    repo.write(  # absval runs in a forked pool worker, which writes no trace
        "test/test_forked.py",
        "import multiprocessing\n"
        "from calc.core import absval, double\n\n\n"
        "def test_absval_in_a_forked_worker():\n"
        "    with multiprocessing.get_context('fork').Pool(1) as pool:\n"
        "        assert pool.apply(absval, (-3,)) == 3\n\n\n"
        "def test_double():\n"
        "    assert double(2) == 4\n",
    )
    repo.commit("test: forked (#801)")
    done = bisect(repo, tmp_path / "c", *_pytest("test/test_forked.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert (
        "reach: 1 of 18 candidates change code the run used, 1 a function it ran "
        + ("(searched first)")
        in lines
    )
    assert "reach: 1 commits changing what ran reverted: good; next the 18 candidates" in lines
    assert f"culprit: {repo.shas[FIX][:12]} (#200) fix: absval of negatives, " in done.stdout
    assert double[:12] not in done.stdout.split("culprit:")[1]


def _bisect_a_slow_lazy_import(tmp_path: Path, imports: str) -> tuple[str, dict[str, Any]]:
    """A module that takes 3.5 s to import, added by a commit, imported by the test inside
    its function by `imports`: that commit's sha, and `bisect --git --json`'s answer."""
    repo = history_repo(tmp_path / "repo")
    repo.write("python/calc/slow.py", "import time\n\ntime.sleep(3.5)\n")
    slow = repo.commit("feat: a slow module (#810)")
    repo.write(
        "test/test_lazy.py",
        "import importlib\n\n\n"
        "def test_absval_after_a_lazy_import():\n"
        f"    {imports}\n"
        "    from calc.core import absval\n\n"
        "    assert absval(-3) == 3\n",
    )
    repo.commit("test: lazy (#811)")
    done = bisect(repo, tmp_path / "c", "--json", *_pytest("test/test_lazy.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    return slow, json.loads(done.stdout)


def test_the_package_modules_the_first_run_imported_are_imported_by_the_worker_for_the_probes(
    tmp_path: Path,
) -> None:
    # imported by a computed name: the worker's static preload cannot know it
    slow, answer = _bisect_a_slow_lazy_import(tmp_path, "importlib.import_module('calc.' + 'slow')")
    assert [c["sha"] for c in answer["culprits"]] == [slow]  # newest: without it, no import
    widened = [note for note in answer["notes"] if note.startswith("warm worker:")]
    assert len(widened) == 1
    assert re.fullmatch(
        r"warm worker: the first run took \d+\.\d s and imported 1 module of the range's "
        r"packages that the worker had not; it imports them too, for the probes",
        widened[0],
    )
    later = [run["seconds"] for probe in answer["probes"][1:] for run in probe["runs"]]
    assert later and max(later) < 3.5  # no probe imports the slow module again


def test_a_module_the_test_imports_inside_its_function_is_preloaded_before_the_first_run(
    tmp_path: Path,
) -> None:
    slow, answer = _bisect_a_slow_lazy_import(tmp_path, "import calc.slow  # noqa: F401")
    assert [c["sha"] for c in answer["culprits"]] == [slow]
    assert [note for note in answer["notes"] if note.startswith("warm worker:")] == []
    runs = [run["seconds"] for probe in answer["probes"] for run in probe["runs"]]
    assert max(runs) < 3.5  # the first run too: the worker imported calc.slow before it


def test_the_worker_reads_the_changed_files_ahead_so_no_probes_revert_compiles_one(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    log = tmp_path / "misses.log"
    repo.write(
        "test/test_misses.py",
        "from calc.core import absval\n"
        "from prtoggle.patching.freshness import compiled_file\n\n\n"
        "def test_absval():\n"
        f"    with open({str(log)!r}, 'a') as stream:\n"
        "        stream.write(f'{compiled_file.cache_info().misses}\\n')\n"
        "    assert absval(-3) == 3\n",
    )
    repo.commit("test: misses (#840)")
    done = bisect(repo, tmp_path / "c", *_pytest("test/test_misses.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"culprit: {repo.shas[FIX][:12]} (#200)" in done.stdout
    # a forked run counts the server's misses too: the first run none (forked before the
    # server read calc/core.py and calc/__init__.py), each probe those two and none of its
    # own (its revert compiles calc/core.py whole: a third miss without them read ahead)
    first, *probes = log.read_text().split()
    assert (first, set(probes), len(probes) >= 2) == ("0", {"2"}, True)


def test_the_newest_commit_the_test_depends_on_is_named_even_when_it_only_adds_a_constant(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    repo.edit("python/calc/core.py", "def double(x):", "OFFSET = 0\n\n\ndef double(x):")
    newest = repo.commit("feat: an offset constant (#902)")
    repo.write(
        "test/test_offset.py",
        "from calc.core import OFFSET, absval\n\n\n"
        "def test_absval():\n    assert absval(-3) + OFFSET == 3\n",
    )
    repo.commit("test: offset (#903)")
    done = bisect(repo, tmp_path / "c", *_pytest("test/test_offset.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    # the fix is found first (it changes absval, which ran); the constant is newer and
    # reaches the run too: the suffix of the commits newer than the fix fails, so it wins
    assert f"culprit: {newest[:12]} (#902) feat: an offset constant, " in done.stdout
    assert "reverted alone: fails as the search did" in done.stdout


def test_a_failure_from_a_revert_that_does_not_hold_together_is_not_the_regression(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    repo.edit(
        "python/calc/core.py",
        "def double(x):\n    return x * 2\n",
        "def scale():\n    return 2\n\n\ndef double(x):\n    return x * scale()\n",
    )
    repo.commit("refactor: double by scale (#900)")
    repo.write("python/calc/extra.py", "from calc.core import scale\n\nFACTOR = scale()\n")
    extra = repo.commit("feat: extra factor (#901)")
    repo.write(
        "test/test_extra.py",
        "import importlib\n\nfrom calc.core import double\n\n\n"
        "def test_double():\n"
        "    extra = importlib.import_module('calc.extra')  # late: after the revert\n\n"
        "    assert double(2) == 4 == 2 * extra.FACTOR\n",
    )
    repo.commit("test: extra (#902)")
    done = bisect(repo, tmp_path / "c", *_pytest("test/test_extra.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    # reverting the refactor alone takes `scale` away from calc/extra.py, which the tier of
    # commits changing a function the run ran does not revert: not the regression
    assert (
        "incoherent: the revert takes scale from calc.core, which calc/extra.py (not reverted "
        "by this probe) imports"
    ) in done.stdout
    assert f"culprit: {extra[:12]} (#901) feat: extra factor, " in done.stdout


def test_a_failure_importing_a_module_the_head_no_longer_has_is_not_the_regression(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    repo.write("python/calc/old_ops.py", "def helper():\n    return 1\n")
    helped = "def helped():\n    from calc.old_ops import helper\n\n    return helper()\n\n\n"
    repo.edit("python/calc/core.py", "def double(x):", helped + "def double(x):")
    added = repo.commit("feat: helped (#819)")
    (repo.root / "python/calc/old_ops.py").rename(repo.root / "python/calc/ops.py")
    repo.edit("python/calc/core.py", "from calc.old_ops import", "from calc.ops import")
    moved = repo.commit("refactor: move old_ops to ops (#820)")
    repo.write(
        "test/test_helped.py",
        "from calc.core import helped\n\n\ndef test_helped():\n    assert helped() == 1\n",
    )
    repo.commit("test: helped (#821)")
    done = bisect(repo, tmp_path / "c", *_pytest("test/test_helped.py"))
    # reverting the move alone cannot bring old_ops back: that failure is not the
    # regression; the test depends on the commit that added helped
    assert "incoherent: the reverted code imports calc.old_ops, which the package at the " in (
        done.stdout
    )
    assert f"culprit: {added[:12]} (#819) feat: helped, " in done.stdout, done.stdout
    assert moved[:12] in done.stdout.split("cannot be ruled out:")[1]


def test_a_flaky_command_is_judged_by_the_majority_and_a_fingerprint_keeps_other_failures_out(
    repo: HistoryRepo, tmp_path: Path
) -> None:
    counter = tmp_path / "runs"
    counter.write_text("0")
    conftest = repo.root / "test" / "conftest.py"
    conftest.write_text(
        "import os, pathlib\n"
        "path = pathlib.Path(os.environ['FLAKY_COUNTER'])\n"
        "count = int(path.read_text()) + 1\n"
        "path.write_text(str(count))\n"
        "if count % 3 == 0:\n"
        "    raise ConnectionResetError('the flaky service hung up')\n"
    )
    try:
        done = repo.prtoggle(
            "bisect",
            "--git",
            f"{repo.shas['start']}..HEAD",
            "--repeat",
            "3",
            "--fingerprint",
            r"assert -3 == 3",
            "--json",
            *PYTEST,
            cache=tmp_path / "c",
            env={"FLAKY_COUNTER": str(counter)},
        )
    finally:
        conftest.unlink()
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert [c["sha"] for c in answer["culprits"]] == [repo.shas[FIX]]
    runs = [run for probe in answer["probes"] for run in probe["runs"]]
    flaky = [run for run in runs if run["signature"].startswith("ConnectionResetError")]
    assert flaky, runs  # every third run fails for another reason: never counted as bad
    assert {run["outcome"] for run in flaky} <= {"good", "other"}
    assert {run["note"] for run in flaky if run["outcome"] == "other"} == {
        "fails differently: ConnectionResetError: the flaky service hung up"
    }
    assert answer["failure_counted"] == "a failure whose output matches 'assert -3 == 3'"
    assert int(counter.read_text()) == len(runs)


def _env(repo: HistoryRepo) -> dict[str, str]:
    import os

    environ = dict(os.environ)
    environ.pop("SGLANG_DEBUG_REVERT_PR", None)
    return environ


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_search_its_runs_and_the_warm_worker_at_once(
    tmp_path: Path, signum: int
) -> None:
    repo = history_repo(tmp_path / "repo")
    marker = tmp_path / "run.pid"
    repo.write(
        "test/test_slow.py",
        "import os, time\n\n\ndef test_slow():\n"
        f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n",
    )
    repo.commit("test: slow (#830)")
    env = {
        **os.environ,
        "PYTHONPATH": str(repo.root / "python"),
        "PRTOGGLE_CACHE_DIR": str(tmp_path / "c"),
    }
    command = [sys.executable, "-m", "prtoggle", "bisect", "--git", f"{repo.shas['start']}..HEAD"]
    process = subprocess.Popen(
        [*command, *_pytest("test/test_slow.py")],
        cwd=repo.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    run_pid = int(marker.read_text())  # the first run, waited on by the helper thread
    assert_signal_ends_all(process, signum, [run_pid, parent_of(run_pid)])

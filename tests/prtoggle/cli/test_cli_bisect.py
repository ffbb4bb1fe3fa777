"""Tests for `prtoggle bisect` against a fake registry and real child processes."""

from __future__ import annotations

import json
import os
import sys

import pytest
from cli_fakes import (
    ANSWER_FIX,
    BROKEN_FIX,
    FIRST_HALF_FIX,
    HARMLESS_FIX,
    SECOND_HALF_FIX,
    TARGET_MODULE,
    FakeProject,
    fake_project,
    python_command,
)
from click.testing import CliRunner, Result

from prtoggle.cli.main import cli

__all__ = ["fake_project"]

FAILS_ON_WRONG_ANSWER = python_command(
    f"import sys, {TARGET_MODULE} as m; sys.exit(0 if m.answer() == 42 else 1)"
)
FAILS_WHEN_BOTH_HALVES_ARE_GONE = python_command(
    f"import sys, {TARGET_MODULE} as m; sys.exit(0 if m.first_half() + m.second_half() else 1)"
)


def bisect(*args: str) -> Result:
    return CliRunner().invoke(cli, ["bisect", *args], prog_name="prtoggle")


def test_attribute_names_the_fix_and_prints_each_run(fake_project: FakeProject) -> None:
    result = bisect("--", *FAILS_ON_WRONG_ANSWER)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"skip: PR {BROKEN_FIX} is left out, its revert does not apply: ")
    runs = [line for line in lines if line.startswith("run ")]
    assert [line.split(" (")[0] for line in runs] == [
        "run 1: reverted none -> good",
        f"run 2: reverted {FIRST_HALF_FIX} -> good",
        f"run 3: reverted {ANSWER_FIX} -> bad",
        f"run 4: reverted {SECOND_HALF_FIX} -> good",
        f"run 5: reverted {HARMLESS_FIX} -> good",
    ]
    assert lines[-2:] == [
        f"culprit: {ANSWER_FIX} (attribute, 5 runs)",
        f"reverting {ANSWER_FIX} alone makes the command fail",
    ]


def test_ordered_names_the_oldest_needed_fix(fake_project: FakeProject) -> None:
    result = bisect("--mode", "ordered", "--", *FAILS_ON_WRONG_ANSWER)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-2] == f"culprit: {ANSWER_FIX} (ordered, 4 runs)"
    assert result.output.splitlines()[-1] == (
        f"reverting {ANSWER_FIX} together with every newer fix makes the command fail, "
        f"reverting only the newer {SECOND_HALF_FIX}, {HARMLESS_FIX} does not"
    )


def test_ddmin_finds_two_fixes_that_only_fail_together(fake_project: FakeProject) -> None:
    result = bisect("--mode", "ddmin", "--json", "--", *FAILS_WHEN_BOTH_HALVES_ARE_GONE)
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["culprits"] == [FIRST_HALF_FIX, SECOND_HALF_FIX]
    assert answer["not_applicable"] == [BROKEN_FIX]
    assert answer["runs"] == len(answer["probes"])
    assert answer["probes"][0]["reverted"] == []
    assert answer["probes"][0]["verdict"] == "good"
    assert {"class", "exit_code", "seconds", "note"} <= set(answer["probes"][0])


def test_attribute_finds_no_single_culprit_for_an_interaction(fake_project: FakeProject) -> None:
    result = bisect("--json", "--", *FAILS_WHEN_BOTH_HALVES_ARE_GONE)
    assert result.exit_code == 1
    answer = json.loads(result.stdout)
    assert (answer["found"], answer["culprits"]) == (False, [])
    assert "try --mode ddmin" in answer["conclusion"]


def test_a_crash_counts_as_bad_by_default(fake_project: FakeProject) -> None:
    crashes = python_command(
        f"import os, signal, {TARGET_MODULE} as m\n"
        "if m.answer() != 42:\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    result = bisect("-r", f"{ANSWER_FIX},{FIRST_HALF_FIX}", "--", *crashes)
    assert result.exit_code == 0, result.output
    assert f"run 3: reverted {ANSWER_FIX} -> crash, counted bad (exit -9, " in result.output
    assert "killed by SIGKILL" in result.output
    assert result.output.splitlines()[-2] == f"culprit: {ANSWER_FIX} (attribute, 3 runs)"


def test_crash_as_skip_leaves_no_culprit(fake_project: FakeProject) -> None:
    crashes = python_command(
        f"import os, {TARGET_MODULE} as m\nif m.answer() != 42:\n    os.abort()\n"
    )
    result = bisect("--crash-as", "skip", "-r", str(ANSWER_FIX), "--", *crashes)
    assert result.exit_code == 1
    assert "no culprit found (attribute, 2 runs)" in result.output
    assert f"skipped: {ANSWER_FIX}" in result.output


def test_a_timeout_is_classified_and_counted_as_skip(fake_project: FakeProject) -> None:
    hangs = python_command(
        f"import time, {TARGET_MODULE} as m\nif m.answer() != 42:\n    time.sleep(60)\n"
    )
    result = bisect("--timeout", "1", "-r", str(ANSWER_FIX), "--", *hangs)
    assert result.exit_code == 1
    assert (
        f"run 2: reverted {ANSWER_FIX} -> timeout, counted skip (no exit status, " in result.output
    )
    assert "killed after 1 s" in result.output


def test_exit_125_is_a_skip(fake_project: FakeProject) -> None:
    skips = python_command(
        f"import sys, {TARGET_MODULE} as m; sys.exit(0 if m.answer() == 42 else 125)"
    )
    result = bisect("-r", str(ANSWER_FIX), "--", *skips)
    assert result.exit_code == 1
    assert f"run 2: reverted {ANSWER_FIX} -> skip (exit 125, " in result.output


def test_a_bad_baseline_stops_the_search(fake_project: FakeProject) -> None:
    result = bisect("--", *python_command("raise SystemExit(1)"))
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        "with nothing reverted the command is bad, expected good: "
        "the failure does not depend on reverting a fix"
    )


def test_unknown_candidate_is_a_one_line_error(fake_project: FakeProject) -> None:
    result = bisect("-r", "5", "--", "true")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: -r='5': PR 5 is not registered; registered PRs: ")


def test_bisect_over_a_guarding_pytest_file_names_the_guarded_fix(
    fake_project: FakeProject,
) -> None:
    # The plain test fails only when ANSWER_FIX is reverted; its [reverted-N] variant is not
    # generated in that run (the session already reverts N), so the run is bad, not inverted.
    (fake_project.source_dir / "pytest.ini").write_text("[pytest]\n")
    test_file = fake_project.source_dir / "test_guard.py"
    test_file.write_text(
        f"import pytest\nimport {TARGET_MODULE} as target\n\n"
        f"@pytest.mark.guards_pr({ANSWER_FIX}, expect='AssertionError')\n"
        "def test_answer():\n    assert target.answer() == 42\n"
    )
    pytest_command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    result = bisect("-r", f"{FIRST_HALF_FIX},{ANSWER_FIX}", "--", *pytest_command, str(test_file))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-2] == f"culprit: {ANSWER_FIX} (attribute, 3 runs)"


ACCURACY_SCRIPT = (
    f"import {TARGET_MODULE} as m\n"
    "accuracy = 0.93 if m.answer() == 42 else 0.41\n"
    "print(f'step 1 accuracy: 0.10')\n"
    "print(f'final accuracy: {accuracy}')\n"
)
"""An evaluation that always exits 0; its accuracy drops when ANSWER_FIX is reverted."""


def write_accuracy_script(project: FakeProject) -> str:
    path = project.source_dir / "evaluate.py"
    path.write_text(ACCURACY_SCRIPT)
    return str(path)


def test_metric_bisect_names_the_fix_behind_an_accuracy_drop(fake_project: FakeProject) -> None:
    script = write_accuracy_script(fake_project)
    metric = ["--metric", r"final accuracy: ([0-9.]+)", "--threshold", "0.9"]
    result = bisect(*metric, "--json", "--", sys.executable, script)
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["culprits"] == [ANSWER_FIX]
    by_set = {tuple(probe["reverted"]): probe for probe in answer["probes"]}
    assert by_set[()]["metric"] == 0.93
    assert by_set[(ANSWER_FIX,)]["metric"] == 0.41
    assert (by_set[(ANSWER_FIX,)]["exit_code"], by_set[(ANSWER_FIX,)]["verdict"]) == (0, "bad")
    assert f"run 3: reverted {ANSWER_FIX} -> bad (exit 0, metric 0.41, " in result.stderr


@pytest.mark.parametrize("mode", ["ordered", "ddmin"])
def test_metric_bisect_works_in_the_searching_modes(fake_project: FakeProject, mode: str) -> None:
    script = write_accuracy_script(fake_project)
    metric = ["--metric", r"final accuracy: ([0-9.]+)", "--threshold", "0.9"]
    result = bisect("--mode", mode, *metric, "--", sys.executable, script)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-2].startswith(f"culprit: {ANSWER_FIX} ({mode}, ")


def test_lower_is_better_reads_a_loss(fake_project: FakeProject) -> None:
    loss = python_command(f"import {TARGET_MODULE} as m; print('loss=', 45 - m.answer())")
    options = ["--metric", r"loss= (\d+)", "--threshold", "3", "--lower-is-better"]
    result = bisect(*options, "-r", f"{ANSWER_FIX},{FIRST_HALF_FIX}", "--", *loss)
    assert result.exit_code == 0, result.output
    assert f"run 3: reverted {ANSWER_FIX} -> bad (exit 0, metric 4, " in result.output
    assert result.output.splitlines()[-2] == f"culprit: {ANSWER_FIX} (attribute, 3 runs)"


def test_a_run_without_the_metric_is_a_skip_with_the_reason(fake_project: FakeProject) -> None:
    silent_when_reverted = python_command(
        f"import {TARGET_MODULE} as m\nif m.answer() == 42:\n    print('accuracy: 0.95')\n"
    )
    options = ["--metric", r"accuracy: ([0-9.]+)", "--threshold", "0.9"]
    result = bisect(*options, "-r", str(ANSWER_FIX), "--", *silent_when_reverted)
    assert result.exit_code == 1
    assert f"run 2: reverted {ANSWER_FIX} -> no metric, counted skip (exit 0, " in result.output
    assert "no number matching --metric 'accuracy: ([0-9.]+)' in stdout or stderr" in result.output
    assert f"skipped: {ANSWER_FIX}" in result.output


def test_metric_options_are_checked_before_anything_runs(fake_project: FakeProject) -> None:
    no_threshold = bisect("--metric", "acc: (.*)", "--", "true")
    assert no_threshold.exit_code == 2
    assert "--metric 'acc: (.*)' needs --threshold X (a number)" in no_threshold.stderr
    bad_regex = bisect("--metric", "acc: (", "--threshold", "1", "--", "true")
    assert bad_regex.exit_code == 2
    assert "'acc: (' is not a regular expression: missing ), unterminated subpattern" in (
        bad_regex.stderr
    )
    orphan = bisect("--threshold", "1", "--", "true")
    assert orphan.exit_code == 2
    assert "--threshold and --lower-is-better need --metric REGEX" in orphan.stderr


def test_warm_and_cold_runs_give_the_same_answer_and_runs(fake_project: FakeProject) -> None:
    check = [*FAILS_WHEN_BOTH_HALVES_ARE_GONE]
    warm = bisect("--mode", "ddmin", "--json", "--", *check)
    cold = bisect("--mode", "ddmin", "--json", "--cold", "--", *check)
    assert warm.exit_code == cold.exit_code == 0
    strip = lambda probes: [{**p, "seconds": None} for p in probes]  # noqa: E731
    warm_answer, cold_answer = json.loads(warm.stdout), json.loads(cold.stdout)
    assert strip(warm_answer.pop("probes")) == strip(cold_answer.pop("probes"))
    assert warm_answer == cold_answer


def shared_number_collection(fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second collection `engine2` holding ANSWER_FIX (another version's) and SECOND_HALF_FIX.

    Its ANSWER_FIX recipe is for prtoggle-fake <2.0 and edits the same line as the
    registry's, while 2.3 is installed: out of range, so it does not take part (taking
    part, the two could not apply together: a conflict).
    """
    directory = fake_project.registry_dir.parent / "engine2"
    directory.mkdir()
    (directory / f"{ANSWER_FIX}.yaml").write_text(
        f"applies_to: prtoggle-fake>=1.0,<2.0\npatches:\n  - target: {TARGET_MODULE}.answer\n"
        "    edits:\n      - match: value = 42\n        replacement: value = 40\n"
    )
    (directory / f"{SECOND_HALF_FIX}.yaml").write_text(
        f"patches:\n  - target: {TARGET_MODULE}.first_half\n    edits:\n"
        "      - match: return half\n        replacement: return half  # engine2\n"
    )
    dist_info = fake_project.source_dir / "prtoggle_fake-2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Name: prtoggle-fake\nVersion: 2.3\n")
    monkeypatch.setenv(
        "PRTOGGLE_YAML_PATH", os.pathsep.join([str(fake_project.registry_dir), str(directory)])
    )


def test_ddmin_names_a_culprit_held_by_two_collections_once_and_an_out_of_range_one_is_absent(
    fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared_number_collection(fake_project, monkeypatch)
    spec = f"{ANSWER_FIX},{SECOND_HALF_FIX}"
    result = bisect("--mode", "ddmin", "-r", spec, "--", *FAILS_ON_WRONG_ANSWER)
    assert result.exit_code == 0, result.output
    assert "conflict" not in result.output
    assert result.output.splitlines()[-2:] == [
        f"culprit: {ANSWER_FIX} (ddmin, 3 runs)",
        f"reverting {ANSWER_FIX} alone makes the command fail",
    ]

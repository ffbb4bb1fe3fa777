"""Tests for `prtoggle repro` with a fake scenario that speaks the real outcome protocol."""

from __future__ import annotations

import json
import re

import pytest
from cli_fakes import (
    ANSWER_FIX,
    FIRST_HALF_FIX,
    SCENARIO_MODULE,
    TARGET_MODULE,
    FakeProject,
    fake_project,
    invoke,
)
from click.testing import CliRunner, Result

from prtoggle.cli.main import cli
from prtoggle.cli.repro import _print_table
from prtoggle.commands.repro import ReproResult, ScenarioResult
from prtoggle.runners.child_process import CommandRun

__all__ = ["fake_project"]

WRONG_EXPECT_FIX = 90006
SILENT_FIX = 90007


def repro(*args: str) -> Result:
    return CliRunner().invoke(cli, ["repro", *args], prog_name="prtoggle")


def add_fix(
    project: FakeProject, pr: int, *, function: str, match: str, replacement: str, expect: str
) -> None:
    (project.registry_dir / f"{pr}.yaml").write_text(
        f'pr: {pr}\ntitle: extra fix {pr}\nexpect: "{expect}"\nrepro: {SCENARIO_MODULE}\n'
        f"patches:\n  - target: {TARGET_MODULE}.{function}\n    edits:\n"
        f'      - match: "{match}"\n        replacement: "{replacement}"\n'
    )


def test_repro_runs_fixed_and_reverted_and_reports_reproduced(fake_project: FakeProject) -> None:
    result = repro(str(ANSWER_FIX))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["PR", "FIXED", "REVERTED", "REPRODUCED", "SECONDS"]
    assert lines[1].split()[:5] == [str(ANSWER_FIX), "clean", "WrongAnswer", "at", "fake.answer"]
    assert lines[1].split()[5] == "yes"
    assert re.fullmatch(r"\d+\.\d / \d+\.\d", lines[1].split("yes", 1)[1].strip())
    assert re.fullmatch(r"1 of 1 fix reproduced in \d+\.\d s", lines[-1])
    progress = sorted(line.split(" (")[0] for line in result.stderr.splitlines())
    assert progress == [
        f"PR {ANSWER_FIX} fixed: clean",
        f"PR {ANSWER_FIX} reverted: WrongAnswer at fake.answer",
    ]


def test_repro_json_has_both_outcomes(fake_project: FakeProject) -> None:
    result = repro(str(ANSWER_FIX), "--json", "--jobs", "2")
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.stdout)
    assert (record["pr"], record["reproduced"]) == (ANSWER_FIX, True)
    assert record["fixed"]["outcome"] == "clean"
    assert (record["fixed"]["error"], record["fixed"]["site"]) == (None, None)
    assert record["reverted"]["outcome"] == "failure"
    assert (record["reverted"]["error"], record["reverted"]["site"]) == (
        "WrongAnswer",
        "fake.answer",
    )
    assert record["reverted"]["message"] == "got 41, expected 42"
    assert isinstance(record["fixed"]["seconds"], float)


def test_a_failure_not_matching_expect_is_not_reproduced(fake_project: FakeProject) -> None:
    add_fix(
        fake_project,
        WRONG_EXPECT_FIX,
        function="answer",
        match="value = 42",
        replacement="value = 40",
        expect="NaNDetected",
    )
    result = repro(str(WRONG_EXPECT_FIX))
    assert result.exit_code == 1
    assert f"PR {WRONG_EXPECT_FIX} ({SCENARIO_MODULE}) did not reproduce:" in result.output
    assert "  reverted run failed with WrongAnswer at fake.answer: got 40, expected 42" in (
        result.output
    )
    assert "  expected a failure matching 'NaNDetected'" in result.output
    assert result.stdout.splitlines()[-1].startswith("0 of 1 fix reproduced in ")


def test_a_revert_that_changes_nothing_is_not_reproduced(fake_project: FakeProject) -> None:
    add_fix(
        fake_project,
        SILENT_FIX,
        function="first_half",
        match="half = 21",
        replacement="half = 20",
        expect="WrongAnswer",
    )
    result = repro("--all", "--json")
    assert result.exit_code == 1
    records = {record["pr"]: record for record in json.loads(result.stdout)}
    assert sorted(records) == [ANSWER_FIX, SILENT_FIX]
    assert records[ANSWER_FIX]["reproduced"] is True
    assert records[SILENT_FIX]["reproduced"] is False
    assert records[SILENT_FIX]["reverted"]["outcome"] == "clean"


SEE_HELP = " (see `prtoggle repro --help`)\n"


def test_repro_needs_prs_or_all(fake_project: FakeProject) -> None:
    result = repro()
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: expected PR numbers or --all; fixes with a repro scenario: {ANSWER_FIX}"
        + SEE_HELP,
    )


def test_repro_refuses_a_fix_without_scenario_or_guards_saying_how_to_add_guards(
    fake_project: FakeProject,
) -> None:
    result = repro(str(FIRST_HALF_FIX))
    path = fake_project.registry_dir / f"{FIRST_HALF_FIX}.yaml"
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: PR {FIRST_HALF_FIX} ({path}) has no guards and no repro scenario; record "
        "the fix's tests with `prtoggle new --from-git REV` (it writes `guards:`) or add "
        "`guards: [path/to/test_x.py::test_y]` to the recipe" + SEE_HELP,
    )


def test_repro_refuses_prs_and_all_together(fake_project: FakeProject) -> None:
    result = repro("--all", str(ANSWER_FIX))
    assert (result.exit_code, result.stderr) == (
        2,
        "error: give PR numbers or --all, not both" + SEE_HELP,
    )


def test_repro_unknown_pr_is_a_one_line_error(fake_project: FakeProject) -> None:
    result = repro("31337")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: PR 31337 is not registered; registered PRs: ")


def test_repro_of_a_shipped_fix_reproduces_on_cpu() -> None:
    result = repro("27460", "--json")  # the shipped registry and scenario, real children
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.stdout)
    assert record["reproduced"] is True
    assert record["fixed"]["outcome"] == "clean"
    assert record["reverted"]["error"] == "OOBDetected"


@pytest.mark.gpu
def test_repro_all_reproduces_every_shipped_fix_on_cuda() -> None:
    result = repro("--all", "--device", "cuda", "--json", "--timeout", "900")
    records = json.loads(result.stdout)
    assert {record["pr"]: record["reproduced"] for record in records} == {
        21649: True,
        22832: True,
        24856: True,
        26521: True,
        27460: True,
    }, result.output
    assert result.exit_code == 0


def scenario_that_took(seconds: float, *, clean: bool) -> ScenarioResult:
    run = CommandRun(("python",), 0 if clean else 1, seconds, "", "")
    return ScenarioResult(
        kind="clean" if clean else "failure",
        error=None if clean else "WrongAnswer",
        site=None,
        message="",
        seconds=seconds,
        run=run,
    )


def test_seconds_are_each_runs_wall_time_and_the_total_the_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The two runs overlapped: 1.5 s and 2.0 s each, 2.1 s for the command (not 3.5 s).
    result = ReproResult(
        pr=ANSWER_FIX,
        module=SCENARIO_MODULE,
        expect="WrongAnswer",
        fixed=scenario_that_took(1.5, clean=True),
        reverted=scenario_that_took(2.0, clean=False),
    )
    _print_table([result], seconds=2.1)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["PR", "FIXED", "REVERTED", "REPRODUCED", "SECONDS"]
    assert lines[1].split() == [str(ANSWER_FIX), "clean", "WrongAnswer", "yes", "1.5", "/", "2.0"]
    assert lines[-1] == "1 of 1 fix reproduced in 2.1 s"


def test_repro_takes_a_collection_and_names_the_known_ones(fake_project: FakeProject) -> None:
    result = invoke("repro", "--all", "--collection", "vllm")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: no recipe collection named 'vllm'; collections: registry "
        f"({fake_project.registry_dir})\n"
    )

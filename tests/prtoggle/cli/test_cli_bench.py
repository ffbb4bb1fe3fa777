"""Tests for `prtoggle bench` with fake benchmark modules that speak the real JSON protocol."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bench_fakes import (
    BENCH_FIX,
    BENCH_MODULE,
    FAILING_BENCH_FIX,
    add_bench_fixes,
)
from cli_fakes import ANSWER_FIX, BROKEN_FIX, FakeProject, fake_project
from click.testing import CliRunner, Result

from prtoggle.cli.main import cli

__all__ = ["fake_project"]


@pytest.fixture
def bench_project(fake_project: FakeProject) -> FakeProject:
    add_bench_fixes(fake_project)
    return fake_project


def bench(*args: str) -> Result:
    return CliRunner().invoke(cli, ["bench", *args], prog_name="prtoggle")


def test_bench_prints_medians_ratio_spread_and_details(bench_project: FakeProject) -> None:
    result = bench(str(BENCH_FIX), "--repeat", "3")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        *("PR", "BENCHMARK", "FIXED", "REVERTED", "RATIO", "IQR", "FIX", "COST", "COST", "IQR")
    ]
    assert lines[1].split() == [
        *(str(BENCH_FIX), BENCH_MODULE, "2", "ms", "1.1", "ms", "0.550", "0.050", "+81.8%"),
        "+73.9..+90.5%",
    ]
    assert lines[3:9] == [
        f"PR {BENCH_FIX}:",
        "  timed: prtoggle_fake_target.answer",
        "  shape: bs=4, device=cpu",
        "  note: fake note",
        "  buffer_bytes: fixed 2048, reverted 1024",
        "",
    ]
    assert lines[9:] == [
        "1 of 1 fix measured on cpu, 3 interleaved fixed/reverted sample pairs each in one "
        "process; RATIO =",
        "median of per-pair reverted/fixed (above 1: the fix is faster), IQR = its interquartile "
        "range, COST",
        "IQR = FIX COST at those quartiles",
    ]
    progress = [line.split(" (")[0] for line in result.stderr.splitlines()]
    assert progress == [f"PR {BENCH_FIX}: fixed 2 ms, reverted 1.1 ms, ratio 0.550"]


def test_bench_json_has_medians_ratio_spread_and_the_run(bench_project: FakeProject) -> None:
    result = bench(str(BENCH_FIX), "--repeat", "3", "--json")
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.stdout)
    assert {
        key: record[key]
        for key in (
            "pr",
            "benchmark",
            "measured",
            "fixed_median",
            "reverted_median",
            "ratio_reverted_over_fixed",
            "ratio_iqr",
            "fix_cost_percent",
            "reverted_error",
            "extras",
        )
    } == {
        "pr": BENCH_FIX,
        "benchmark": BENCH_MODULE,
        "measured": True,
        "fixed_median": 2.0,
        "reverted_median": 1.1,
        "ratio_reverted_over_fixed": 0.55,
        "ratio_iqr": 0.05,
        "fix_cost_percent": 81.82,
        "reverted_error": None,
        "extras": {"buffer_bytes": {"fixed": 2048, "reverted": 1024}},
    }
    run = record["run"]
    assert set(run) == {"kind", "error", "result", "seconds", "exit_code"}
    reverted = run["result"]["reverted"]
    assert (run["kind"], run["result"]["in_force"], reverted["in_force"]) == ("ok", [], [BENCH_FIX])
    assert run["result"]["samples"] == [2.0, 2.0, 2.0]
    assert (reverted["pr"], reverted["samples"]) == (BENCH_FIX, [1.0, 1.1, 1.2])


def test_a_reverted_sample_that_raises_keeps_the_fixed_median(
    bench_project: FakeProject,
) -> None:
    result = bench("--all", "--repeat", "3")
    assert result.exit_code == 1, result.output
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[1:3]}
    assert rows[str(FAILING_BENCH_FIX)][2:] == ["0.5", "ms", "FAILED", "-", "-", "-", "-"]
    assert rows[str(BENCH_FIX)][-2:] == ["+81.8%", "+73.9..+90.5%"]
    assert (
        "  reverted failed: ValueError: first_half() is 0: the reverted path cannot run here"
    ) in result.stdout.splitlines()
    assert result.stdout.splitlines()[-3].startswith("1 of 2 fixes measured on cpu")
    assert (
        f"PR {FAILING_BENCH_FIX}: fixed 0.5 ms, reverted failed: ValueError: first_half() "
        "is 0: the reverted path cannot run here ("
    ) in result.stderr


def test_an_unknown_pr_is_an_error_listing_the_registered_prs(
    bench_project: FakeProject,
) -> None:
    result = bench("12345")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: PR 12345 is not registered; registered PRs: {ANSWER_FIX}, {BROKEN_FIX}, "
    )
    assert f"{BENCH_FIX}, {FAILING_BENCH_FIX} (registry directories: " in result.stderr


SEE_HELP = " (see `prtoggle bench --help`)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            (),
            f"error: expected PR numbers or --all; fixes with a benchmark: {BENCH_FIX}, "
            f"{FAILING_BENCH_FIX}",
        ),
        (("--all", str(BENCH_FIX)), "error: give PR numbers or --all, not both"),
        (
            ("--repeat", "0", "--all"),
            "error: Invalid value for '--repeat': 0 is not in the range x>=1",
        ),
    ],
)
def test_bad_selections_are_one_line_usage_errors(
    bench_project: FakeProject, args: tuple[str, ...], message: str
) -> None:
    result = bench(*args)
    assert (result.exit_code, result.stderr) == (2, message + SEE_HELP)


def test_a_fix_without_benchmark_is_a_one_line_usage_error(bench_project: FakeProject) -> None:
    result = bench(str(ANSWER_FIX))
    path = bench_project.registry_dir / f"{ANSWER_FIX}.yaml"
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: PR {ANSWER_FIX} has no benchmark (no `bench:` in {path}); fixes with a "
        f"benchmark: {BENCH_FIX}, {FAILING_BENCH_FIX}" + SEE_HELP,
    )


def test_help_shows_examples_and_the_main_help_lists_bench() -> None:
    result = CliRunner().invoke(cli, ["bench", "--help"], prog_name="prtoggle")
    assert result.exit_code == 0
    assert "  Examples:\n    prtoggle bench --all\n" in result.stdout
    assert "RATIO = median of the\n  per-pair reverted/fixed ratios; IQR" in result.stdout
    assert "--rounds" not in result.stdout
    assert "Interleaved fixed/reverted sample pairs per fix, all in one child process." in " ".join(
        result.stdout.split()
    )
    main_help = CliRunner().invoke(cli, ["--help"], prog_name="prtoggle")
    assert "\n  bench " in main_help.stdout


def test_bench_does_not_import_torch_in_the_parent(bench_project: FakeProject) -> None:
    code = (
        f"import sys\nfrom prtoggle.cli.main import main\n"
        f"sys.argv = ['prtoggle', 'bench', '{BENCH_FIX}', '--repeat', '3']\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, env=bench_project.env()
    )

"""Tests for commands.bench: one child interleaving fixed and reverted samples; failures."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
from bench_fakes import (
    BENCH_FIX,
    BENCH_MODULE,
    FAILING_BENCH_FIX,
    FAILING_BENCH_MODULE,
    add_bench_fixes,
)
from cli_fakes import ANSWER_FIX, FakeProject, fake_project

from prtoggle.commands.bench import (
    FixCost,
    bench_env,
    benchmark_argv,
    classify_bench,
    measure_fix_cost,
)
from prtoggle.errors import RunnerError
from prtoggle.recipes.registry import default_registry, load_registry, shipped_yaml_dir
from prtoggle.runners.child_process import CommandRun

__all__ = ["fake_project"]


@pytest.fixture
def bench_project(fake_project: FakeProject) -> FakeProject:
    add_bench_fixes(fake_project)
    return fake_project


def finished(stdout: str = "", stderr: str = "", returncode: int | None = 0) -> CommandRun:
    return CommandRun(
        argv=("python",),
        returncode=returncode,
        seconds=1.0,
        stdout=stdout,
        stderr=stderr,
        timeout=30.0,
    )


def result_line(*, reverted: dict[str, object] | None = None, **overrides: object) -> str:
    """A well-formed result line; `reverted` overrides keys of its reverted half."""
    record: dict[str, object] = {
        "name": "b",
        "timed": "f",
        "unit": "ms",
        "median": 1.5,
        "samples": [1.0, 2.0, 1.5, 1.0],
        "shape": {},
        "in_force": [],
        "reverted": {
            "pr": 7,
            "samples": [1.1, 2.4, 1.5, 1.3],
            "in_force": [7],
            "error": None,
            "extras": {},
            **(reverted or {}),
        },
    }
    record.update(overrides)
    return json.dumps(record)


def cost_of(stdout: str) -> FixCost:
    return FixCost(pr=7, module="m", run=classify_bench(finished(stdout=stdout), module="m", pr=7))


def test_benchmark_argv_asks_for_paired_json_with_the_options() -> None:
    argv = benchmark_argv("fixes.benchmarks.x", pr=7, device="cuda", provider="triton", repeat=9)
    assert argv[1:] == [
        "-m",
        "fixes.benchmarks.x",
        "--device",
        "cuda",
        "--provider",
        "triton",
        "--repeat",
        "9",
        "--pr",
        "7",
        "--json",
    ]


def test_bench_env_reverts_nothing_at_start_and_turns_detection_off() -> None:
    base = {
        "SGLANG_SPEC_NAN_DETECTION": "1",
        "SGLANG_DEBUG_POISON": "1",
        "SGLANG_DEBUG_REVERT_PR": "999",
        "PATH": os.environ["PATH"],
    }
    env = bench_env(base=base)
    assert env["SGLANG_DEBUG_REVERT_PR"] == ""
    assert "SGLANG_SPEC_NAN_DETECTION" not in env and "SGLANG_DEBUG_POISON" not in env


def test_the_ratio_is_the_median_of_per_pair_ratios_with_its_spread() -> None:
    cost = cost_of("noise\n" + result_line() + "\n")
    assert cost.run.kind == "ok" and cost.measured
    assert (cost.fixed_median, cost.reverted_median) == (1.25, 1.4)
    assert cost.pair_ratios == pytest.approx([1.1, 1.2, 1.0, 1.3])
    assert cost.ratio == pytest.approx(1.15)  # not 1.4 / 1.25 = 1.12: pairs, not medians
    assert cost.ratio_iqr == pytest.approx(1.225 - 1.075)
    assert cost.fix_cost_percent == pytest.approx((1 / 1.15 - 1) * 100)
    assert cost.fix_cost_interval == pytest.approx(((1 / 1.225 - 1) * 100, (1 / 1.075 - 1) * 100))
    assert not cost.cost_within_noise


def test_a_fix_cost_whose_interquartile_interval_crosses_zero_is_within_the_noise() -> None:
    cost = cost_of(result_line(reverted={"samples": [0.9, 2.2, 1.5, 1.1]}))
    assert cost.pair_ratios == pytest.approx([0.9, 1.1, 1.0, 1.1])
    assert cost.fix_cost_interval == pytest.approx(((1 / 1.1 - 1) * 100, (1 / 0.975 - 1) * 100))
    assert cost.cost_within_noise
    record = cost.to_dict()
    assert (record["fix_cost_iqr_percent"], record["fix_cost_within_noise"]) == (
        [-9.09, 2.56],
        True,
    )


def test_a_reverted_error_keeps_the_fixed_median_and_gives_no_ratio() -> None:
    cost = cost_of(
        result_line(reverted={"samples": [], "in_force": [], "error": "IndexError: row 9"})
    )
    assert (cost.run.kind, cost.measured, cost.fixed_median) == ("ok", False, 1.25)
    assert (cost.reverted_median, cost.ratio, cost.ratio_iqr) == (None, None, None)
    assert cost.reverted_error == "IndexError: row 9"


def test_a_revert_not_in_force_while_reverted_is_reported_not_measured() -> None:
    cost = cost_of(result_line(reverted={"in_force": []}))
    assert (cost.measured, cost.ratio, cost.reverted_median) == (False, None, None)
    assert cost.reverted_error == (
        "RevertNotInForce: the child reports PRs [] in force while timing reverted, expected [7]"
    )


def test_unpaired_samples_are_reported_not_measured() -> None:
    cost = cost_of(result_line(reverted={"samples": [1.0]}))
    assert cost.measured is False
    assert cost.reverted_error == (
        "UnpairedSamples: 1 reverted samples for 4 fixed ones; expected one per fixed sample"
    )


def test_classify_refuses_a_child_that_timed_fixed_with_a_revert_in_force() -> None:
    run = classify_bench(finished(stdout=result_line(in_force=[7])), module="m", pr=7)
    assert (run.kind, run.result) == ("failure", None)
    assert run.error == (
        "RevertInForceWhileFixed: the child reports reverted PRs [7] while "
        "timing fixed, expected []"
    )


def test_classify_refuses_a_child_that_toggled_another_pr() -> None:
    run = classify_bench(finished(stdout=result_line(reverted={"pr": 8})), module="m", pr=7)
    assert run.error == "WrongPr: the child toggled PR 8, expected 7"


def test_classify_reports_a_failing_child_with_its_last_exception() -> None:
    stderr = "Traceback (most recent call last):\n  ...\nIndexError: row 9 out of range\n"
    run = classify_bench(finished(stderr=stderr, returncode=1), module="m", pr=7)
    assert (run.kind, run.result) == ("failure", None)
    assert run.error == "IndexError: row 9 out of range"
    cost = FixCost(pr=7, module="m", run=run)
    assert (cost.fixed_median, cost.reverted_error) == (None, "IndexError: row 9 out of range")


def test_classify_reports_a_timeout() -> None:
    run = classify_bench(finished(returncode=None), module="m", pr=7)
    assert run.kind == "timeout"
    assert run.error == "Timeout: no result within 30 s; the child was killed"


KEYS = "name, timed, unit, median, samples, shape, in_force, reverted"


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", f"benchmark m: exited 0 but printed nothing; expected one JSON object with {KEYS}"),
        (
            "12 ms\n",
            "benchmark m: last output line '12 ms' is not JSON: Extra data: line 1 "
            f"column 4 (char 3); expected one object with {KEYS}",
        ),
        (
            '{"name": "b"}\n',
            'benchmark m: result \'{"name": "b"}\' lacks timed, unit, median, '
            f"samples, shape, in_force, reverted; expected keys {KEYS}",
        ),
        (
            json.dumps({**json.loads(result_line()), "reverted": None}),
            "benchmark m: 'reverted' must be an object with pr, samples, in_force, error, "
            "extras (the child was given --pr), got None",
        ),
        (result_line(median="fast"), "benchmark m: 'median' must be a number, got 'fast'"),
        (
            result_line(in_force="24856"),
            "benchmark m: 'in_force' must be a list of PR numbers, got '24856'",
        ),
        (
            result_line(reverted={"samples": [1, "x"]}),
            "benchmark m: 'reverted.samples' must be a list of numbers, got [1, 'x']",
        ),
        (
            result_line(reverted={"pr": None}),
            "benchmark m: 'reverted.pr' must be the PR number toggled, got None",
        ),
        (
            result_line(reverted={"error": 3}),
            "benchmark m: 'reverted.error' must be null or a string, got 3",
        ),
    ],
)
def test_malformed_results_are_errors_naming_the_module(stdout: str, message: str) -> None:
    with pytest.raises(RunnerError) as caught:
        classify_bench(finished(stdout=stdout), module="m", pr=7)
    assert str(caught.value) == message


def test_fix_cost_interleaves_fixed_and_reverted_in_one_child(
    bench_project: FakeProject,
) -> None:
    cost = measure_fix_cost(default_registry().get(BENCH_FIX), repeat=3, timeout=60)
    assert (cost.module, cost.measured) == (BENCH_MODULE, True)
    assert (cost.fixed_samples, cost.reverted_samples) == ([2.0] * 3, [1.0, 1.1, 1.2])
    assert cost.ratio == pytest.approx(0.55)
    assert cost.ratio_iqr == pytest.approx(0.05)
    assert cost.extras_compared() == {"buffer_bytes": (2048, 1024)}
    record = cost.to_dict()
    assert (record["ratio_reverted_over_fixed"], record["ratio_iqr"]) == (0.55, 0.05)
    assert record["run"]["result"]["reverted"]["in_force"] == [BENCH_FIX]


def test_a_reverted_sample_that_raises_leaves_the_fixed_median(
    bench_project: FakeProject,
) -> None:
    cost = measure_fix_cost(default_registry().get(FAILING_BENCH_FIX), repeat=3, timeout=60)
    assert (cost.module, cost.run.kind, cost.fixed_median) == (FAILING_BENCH_MODULE, "ok", 0.5)
    assert (cost.measured, cost.ratio, cost.fix_cost_percent) == (False, None, None)
    assert cost.reverted_error == (
        "ValueError: first_half() is 0: the reverted path cannot run here"
    )


def test_a_fix_without_a_benchmark_is_an_error(bench_project: FakeProject) -> None:
    fix = default_registry().get(ANSWER_FIX)
    with pytest.raises(RunnerError) as caught:
        measure_fix_cost(fix)
    assert str(caught.value) == f"PR {ANSWER_FIX} has no benchmark (no `bench:` in {fix.path})"


def test_every_shipped_fix_names_an_importable_benchmark() -> None:
    registry = load_registry(dirs=[shipped_yaml_dir() / "fixes"])
    benches = {fix.pr: fix.bench for fix in registry.recipes}
    assert benches == {
        21649: "fixes.benchmarks.dp_batch_size_cost",
        22832: "fixes.benchmarks.hidden_states_pool_cost",
        24856: "fixes.benchmarks.draft_extend_routing_cost",
        26521: "fixes.benchmarks.draft_decode_capture_cost",
        27460: "fixes.benchmarks.kv_indices_width_cost",
    }
    assert all(importlib.util.find_spec(str(module)) for module in benches.values())

"""Tests for prtoggle.fix_cost: benchmark children fixed and reverted, parsing, failures."""

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

from prtoggle.errors import RunnerError
from prtoggle.fix_cost import (
    bench_command,
    bench_env,
    classify_bench,
    measure_fix_cost,
    pooled,
)
from prtoggle.registry import default_registry, load_registry, shipped_yaml_dir
from prtoggle.runner import CommandRun

__all__ = ["fake_project"]


@pytest.fixture
def bench_project(fake_project: FakeProject) -> FakeProject:
    add_bench_fixes(fake_project)
    return fake_project


def finished(stdout: str = "", stderr: str = "", returncode: int | None = 0) -> CommandRun:
    return CommandRun(argv=("python",), returncode=returncode, seconds=1.0, stdout=stdout,
                      stderr=stderr, timeout=30.0)


def result_line(**overrides: object) -> str:
    record: dict[str, object] = {"name": "b", "timed": "f", "unit": "ms", "median": 1.5,
                                 "samples": [1.5], "shape": {}, "reverted": []}
    record.update(overrides)
    return json.dumps(record)


def test_bench_command_asks_for_json_with_the_options() -> None:
    argv = bench_command("fixes.benchmarks.x", device="cuda", provider="triton", repeat=7)
    assert argv[1:] == ["-m", "fixes.benchmarks.x", "--device", "cuda", "--provider", "triton",
                        "--repeat", "7", "--json"]


def test_bench_env_reverts_the_prs_and_turns_detection_off() -> None:
    base = {"SGLANG_SPEC_NAN_DETECTION": "1", "SGLANG_DEBUG_POISON": "1",
            "SGLANG_DEBUG_REVERT_PR": "999", "PATH": os.environ["PATH"]}
    env = bench_env((24856,), base=base)
    assert env["SGLANG_DEBUG_REVERT_PR"] == "24856"
    assert "SGLANG_SPEC_NAN_DETECTION" not in env and "SGLANG_DEBUG_POISON" not in env
    assert bench_env((), base=base)["SGLANG_DEBUG_REVERT_PR"] == ""


def test_classify_reads_the_last_stdout_line_as_the_result() -> None:
    run = classify_bench(finished(stdout="noise\n" + result_line(reverted=[7]) + "\n"),
                         module="m", prs=(7,))
    assert (run.kind, run.median, run.describe(), run.error) == ("ok", 1.5, "1.5 ms", None)


def test_classify_reports_a_failing_child_with_its_last_exception() -> None:
    stderr = "Traceback (most recent call last):\n  ...\nIndexError: row 9 out of range\n"
    run = classify_bench(finished(stderr=stderr, returncode=1), module="m", prs=(7,))
    assert (run.kind, run.result, run.describe()) == ("failure", None, "FAILED")
    assert run.error == "IndexError: row 9 out of range"


def test_classify_reports_a_child_whose_revert_did_not_apply() -> None:
    stderr = "prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: PR 7 could not be reverted\n"
    run = classify_bench(finished(stderr=stderr, returncode=78), module="m", prs=(7,))
    assert run.error == stderr.strip()


def test_classify_reports_a_timeout() -> None:
    run = classify_bench(finished(returncode=None), module="m", prs=())
    assert (run.kind, run.describe()) == ("timeout", "timeout")
    assert run.error == "Timeout: no result within 30 s; the child was killed"


def test_classify_refuses_a_child_that_did_not_run_reverted() -> None:
    run = classify_bench(finished(stdout=result_line(reverted=[])), module="m", prs=(7,))
    assert run.kind == "failure"
    assert run.error == "RevertNotInForce: the child reports reverted PRs [], expected [7]"


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "benchmark m: exited 0 but printed nothing; expected one JSON object with name, "
             "timed, unit, median, samples, shape, reverted"),
        ("12 ms\n", "benchmark m: last output line '12 ms' is not JSON: Extra data: line 1 "
                    "column 4 (char 3); expected one object with name, timed, unit, median, "
                    "samples, shape, reverted"),
        ('{"name": "b"}\n', "benchmark m: result '{\"name\": \"b\"}' lacks timed, unit, median, "
                            "samples, shape, reverted; expected keys name, timed, unit, median, "
                            "samples, shape, reverted"),
        (result_line(median="fast"), "benchmark m: 'median' must be a number, got 'fast'"),
        (result_line(reverted="24856"),
         "benchmark m: 'reverted' must be a list of PR numbers, got '24856'"),
    ],
)
def test_malformed_results_are_errors_naming_the_module(stdout: str, message: str) -> None:
    with pytest.raises(RunnerError) as caught:
        classify_bench(finished(stdout=stdout), module="m", prs=())
    assert str(caught.value) == message


def test_fix_cost_runs_fixed_then_reverted_and_divides(bench_project: FakeProject) -> None:
    seen: list[str] = []
    cost = measure_fix_cost(default_registry().get(BENCH_FIX), repeat=3, timeout=60,
                            on_done=lambda variant, run: seen.append(f"{variant} {run.kind}"))
    assert seen == ["fixed ok", "reverted ok"]
    assert (cost.module, cost.measured, cost.ratio) == (BENCH_MODULE, True, 0.5)
    assert cost.fix_cost_percent == pytest.approx(100.0)
    assert cost.extras_compared() == {"buffer_bytes": (2048, 1024)}
    record = cost.to_dict()
    assert record["ratio_reverted_over_fixed"] == 0.5
    assert record["fixed"]["result"]["reverted"] == []
    assert record["reverted"]["result"]["reverted"] == [BENCH_FIX]


def test_a_reverted_run_that_fails_has_no_ratio(bench_project: FakeProject) -> None:
    cost = measure_fix_cost(default_registry().get(FAILING_BENCH_FIX), repeat=3, timeout=60)
    assert (cost.module, cost.fixed.kind, cost.reverted.kind) == (
        FAILING_BENCH_MODULE, "ok", "failure")
    assert (cost.measured, cost.ratio, cost.fix_cost_percent) == (False, None, None)
    assert cost.reverted.error == (
        "ValueError: first_half() is 0: the reverted path cannot run here"
    )


def test_a_fix_without_a_benchmark_is_an_error(bench_project: FakeProject) -> None:
    fix = default_registry().get(ANSWER_FIX)
    with pytest.raises(RunnerError) as caught:
        measure_fix_cost(fix)
    assert str(caught.value) == f"PR {ANSWER_FIX} has no benchmark (no `bench:` in {fix.path})"


def test_every_shipped_fix_names_an_importable_benchmark() -> None:
    registry = load_registry(dirs=[shipped_yaml_dir()])
    benches = {pr: fix.bench for pr, fix in registry.fixes.items()}
    assert benches == {
        21649: "fixes.benchmarks.dp_batch_size_cost",
        22832: "fixes.benchmarks.hidden_states_pool_cost",
        24856: "fixes.benchmarks.draft_extend_routing_cost",
        26521: "fixes.benchmarks.draft_decode_capture_cost",
        27460: "fixes.benchmarks.kv_indices_width_cost",
    }
    assert all(importlib.util.find_spec(str(module)) for module in benches.values())


def test_rounds_alternate_the_variants_and_pool_the_samples(bench_project: FakeProject) -> None:
    seen: list[str] = []
    cost = measure_fix_cost(default_registry().get(BENCH_FIX), repeat=3, timeout=60, rounds=2,
                            on_done=lambda variant, run: seen.append(variant))
    assert seen == ["fixed", "reverted", "fixed", "reverted"]
    fixed = cost.fixed.result
    assert fixed is not None
    assert (fixed["samples"], fixed["median"], fixed["rounds"]) == ([2.0] * 6, 2.0, 2)
    assert fixed["round_medians"] == [2.0, 2.0]
    assert cost.ratio == 0.5


def test_pooling_keeps_the_first_failure() -> None:
    ok = classify_bench(finished(stdout=result_line()), module="m", prs=())
    failed = classify_bench(finished(stderr="KeyError: 'x'\n", returncode=1), module="m",
                            prs=())
    assert pooled([ok, failed, ok]) is failed
    merged = pooled([ok, classify_bench(finished(stdout=result_line(median=3.5, samples=[3.5])),
                                        module="m", prs=())])
    assert merged.result is not None
    assert (merged.median, merged.result["samples"], merged.run.seconds) == (2.5, [1.5, 3.5], 2.0)

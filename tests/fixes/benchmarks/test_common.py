"""Tests for fixes.benchmarks.common: timing, results, option checks and the JSON entry."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys

import pytest
import torch
from bench_support import clean_env

import fixes.attention.trtllm_mha_backend  # noqa: F401  (PR 21649's target, loaded: patchable)
from fixes.benchmarks.common import (
    SETTLE_CALLS,
    BenchOptions,
    PairedTiming,
    bench_device,
    make_result,
    shape_of,
    time_pair,
    torch_or_triton_provider,
)
from fixes.errors import EngineUsageError
from prtoggle.protocol import BENCH_RESULT_KEYS, BENCH_REVERTED_KEYS
from prtoggle.revert.toggle import active_reverts, is_reverted

TOGGLED_PR = 21649
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


def test_time_pair_without_a_pr_warms_up_then_takes_repeat_samples() -> None:
    counted: list[int] = []
    timing = time_pair(
        lambda: counted.append(1), device=CPU, options=BenchOptions(repeat=3, warmup=2)
    )
    assert (len(timing.fixed), timing.reverted, timing.reverted_error) == (3, [], None)
    assert 1 <= timing.calls_per_sample <= 1000
    calls = timing.calls_per_sample
    # warm-ups, calibration, the untimed sample, the samples (each settled first)
    assert len(counted) == 2 + 1 + calls + 3 * (min(calls, SETTLE_CALLS) + calls)


def test_time_pair_interleaves_fixed_and_reverted_samples_abba() -> None:
    states: list[bool] = []
    timing = time_pair(
        lambda: states.append(is_reverted(TOGGLED_PR)),
        device=CPU,
        options=BenchOptions(repeat=3, warmup=1, pr=TOGGLED_PR),
    )
    calls = timing.calls_per_sample
    runs = [(state, len(list(group))) for state, group in itertools.groupby(states)]
    # warm-ups: fixed 1, reverted 1; calibration call + untimed fixed sample; untimed
    # reverted sample; then pair 0 fixed | pair 0 reverted + pair 1 reverted |
    # pair 1 fixed + pair 2 fixed | pair 2 reverted; each timed sample settles first
    sample = min(calls, SETTLE_CALLS) + calls
    assert runs == [
        (False, 1),
        (True, 1),
        (False, 1 + calls),
        (True, calls),
        (False, sample),
        (True, 2 * sample),
        (False, 2 * sample),
        (True, sample),
    ]
    assert (len(timing.fixed), len(timing.reverted)) == (3, 3)
    assert (timing.reverted_in_force, timing.reverted_error) == ([TOGGLED_PR], None)
    assert active_reverts() == ()


def test_a_reverted_call_that_raises_ends_the_reverted_samples_only() -> None:
    def call() -> None:
        if is_reverted(TOGGLED_PR):
            raise ValueError("reverted path cannot run")

    timing = time_pair(call, device=CPU, options=BenchOptions(repeat=4, warmup=1, pr=TOGGLED_PR))
    assert (len(timing.fixed), timing.reverted) == (4, [])
    assert timing.reverted_error == "ValueError: reverted path cannot run"
    assert active_reverts() == ()


def test_make_result_takes_the_median_and_names_dtypes() -> None:
    timing = PairedTiming(
        calls_per_sample=4, fixed=[3.0, 1.0, 2.0], reverted=[1.5, 1.0, 2.5], reverted_in_force=[7]
    )
    result = make_result(
        name="n",
        timed="f",
        timing=timing,
        pr=7,
        shape=shape_of(bs=2, dtype=torch.bfloat16),
        extras={"bytes": 8},
        reverted_extras={"bytes": 4},
    )
    record = json.loads(result.to_json())
    assert record == {
        "name": "n",
        "timed": "f",
        "unit": "ms",
        "median": 2.0,
        "samples": [3.0, 1.0, 2.0],
        "shape": {"bs": 2, "dtype": "bfloat16"},
        "calls_per_sample": 4,
        "in_force": [],
        "extras": {"bytes": 8},
        "note": "",
        "reverted": {
            "pr": 7,
            "samples": [1.5, 1.0, 2.5],
            "in_force": [7],
            "error": None,
            "extras": {"bytes": 4},
        },
    }
    assert set(BENCH_RESULT_KEYS) <= set(record)
    assert set(record["reverted"]) == set(BENCH_REVERTED_KEYS)
    assert result.describe().splitlines()[-1] == (
        "  PR 7 reverted, interleaved: median 1.5 ms per call"
    )
    assert result.reverted is not None
    failed = dataclasses.replace(
        result, reverted=dataclasses.replace(result.reverted, samples=[], error="KeyError: 'x'")
    )
    assert failed.describe().splitlines()[-1] == "  PR 7 reverted: failed: KeyError: 'x'"


def test_make_result_without_a_pr_has_no_reverted_half() -> None:
    timing = PairedTiming(calls_per_sample=1, fixed=[1.0])
    result = make_result(name="n", timed="f", timing=timing, shape={})
    assert result.reverted is None
    assert json.loads(result.to_json())["reverted"] is None


def test_bad_options_are_refused_naming_the_value() -> None:
    with pytest.raises(EngineUsageError) as caught:
        bench_device(BenchOptions(repeat=0))
    assert str(caught.value) == (
        "benchmark repeat must be >= 1 and warmup >= 0, got repeat 0 and warmup 2"
    )


def test_module_entry_prints_one_json_object() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "fixes.benchmarks.draft_decode_capture_cost",
            "--repeat",
            "2",
            "--pr",
            "26521",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    record = json.loads(completed.stdout)
    assert (record["name"], record["unit"], len(record["samples"])) == (
        "draft_decode_capture_cost",
        "ms",
        2,
    )
    assert set(record) == {*BENCH_RESULT_KEYS, "calls_per_sample", "extras", "note"}
    assert (record["in_force"], record["reverted"]["pr"], record["reverted"]["in_force"]) == (
        [],
        26521,
        [26521],
    )
    assert len(record["reverted"]["samples"]) == 2


def test_module_entry_reports_an_error_as_its_last_line() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "fixes.benchmarks.kv_indices_width_cost", "--provider", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 1
    assert completed.stderr.splitlines()[-1] == (
        "EngineUsageError: kv_indices_width_cost: --provider 'nope' is not supported: expected "
        "torch or triton (the kv_indices kernel; attention is not timed)"
    )


def test_provider_defaults_to_torch_on_cpu_and_triton_on_cuda() -> None:
    assert torch_or_triton_provider(BenchOptions(device="cpu"), bench="b") == "torch"
    assert torch_or_triton_provider(BenchOptions(device="cuda"), bench="b") == "triton"
    assert torch_or_triton_provider(BenchOptions(provider="triton"), bench="b") == "triton"


def test_unsupported_provider_names_the_bench_the_choices_and_the_note() -> None:
    with pytest.raises(EngineUsageError) as info:
        torch_or_triton_provider(
            BenchOptions(provider="flashinfer"), bench="demo_cost", note=" (the demo kernel)"
        )
    assert str(info.value) == (
        "demo_cost: --provider 'flashinfer' is not supported: expected torch or triton "
        "(the demo kernel)"
    )

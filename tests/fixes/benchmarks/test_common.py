"""Tests for fixes.benchmarks.common: timing, results, option checks and the JSON entry."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from bench_support import clean_env

from fixes.benchmarks.common import (
    BenchOptions,
    bench_device,
    make_result,
    shape_of,
    time_call,
)
from prtoggle.errors import PrToggleError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


def test_time_call_warms_up_then_takes_repeat_samples() -> None:
    counted: list[int] = []
    samples, calls = time_call(lambda: counted.append(1), device=torch.device("cpu"),
                               options=BenchOptions(repeat=3, warmup=2))
    assert len(samples) == 3
    assert 1 <= calls <= 1000
    assert len(counted) == 2 + 1 + 3 * calls  # warm-ups, the calibration call, the samples


def test_make_result_takes_the_median_and_names_dtypes() -> None:
    result = make_result(name="n", timed="f", samples=[3.0, 1.0, 2.0], calls_per_sample=4,
                         shape=shape_of(bs=2, dtype=torch.bfloat16), extras={"bytes": 8})
    record = json.loads(result.to_json())
    assert record == {
        "name": "n", "timed": "f", "unit": "ms", "median": 2.0, "samples": [3.0, 1.0, 2.0],
        "shape": {"bs": 2, "dtype": "bfloat16"}, "calls_per_sample": 4, "reverted": [],
        "extras": {"bytes": 8}, "note": "",
    }


def test_bad_options_are_refused_naming_the_value() -> None:
    with pytest.raises(PrToggleError) as caught:
        bench_device(BenchOptions(repeat=0))
    assert str(caught.value) == (
        "benchmark repeat must be >= 1 and warmup >= 0, got repeat 0 and warmup 2"
    )


def test_module_entry_prints_one_json_object() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "fixes.benchmarks.draft_decode_capture_cost", "--repeat", "2",
         "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    record = json.loads(completed.stdout)
    assert (record["name"], record["unit"], len(record["samples"])) == (
        "draft_decode_capture_cost", "ms", 2)
    assert set(record) == {"name", "timed", "unit", "median", "samples", "shape",
                           "calls_per_sample", "reverted", "extras", "note"}


def test_module_entry_reports_an_error_as_its_last_line() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "fixes.benchmarks.kv_indices_width_cost", "--provider", "nope"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 1
    assert completed.stderr.splitlines()[-1] == (
        "PrToggleError: kv_indices_width_cost: --provider 'nope' is not supported: expected "
        "torch or triton (the kv_indices kernel; attention is not timed)"
    )

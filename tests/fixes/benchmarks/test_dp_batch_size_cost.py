"""Tests for the #21649 fix-cost benchmark: forward_extend of a draft extend not padded by DP."""

from __future__ import annotations

import pytest
from bench_support import QUICK, assert_paired, assert_well_formed, clean_env, paired

import prtoggle
from fixes.benchmarks import dp_batch_size_cost as bench


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


def test_fixed_result_is_well_formed() -> None:
    result = bench.measure(QUICK)
    assert_well_formed(result, name="dp_batch_size_cost", reverted=[])
    assert result.shape["accept_length_cycle"] == [1, 3, 2, 4]
    assert result.note == (
        "same context kernel and batch size either way (no DP padding): expect ~1.0"
    )


def test_reverted_runs_without_failing() -> None:
    with prtoggle.reverted(21649):
        result = bench.measure(QUICK)
    assert_well_formed(result, name="dp_batch_size_cost", reverted=[21649])


def test_a_paired_run_times_the_reverted_code_beside_the_fixed() -> None:
    assert_paired(bench.measure(paired(21649)), name="dp_batch_size_cost", pr=21649)

"""Tests for the #22832 fix-cost benchmark: draft extend of a batch the graphs run."""

from __future__ import annotations

import pytest
from bench_support import QUICK, assert_well_formed, clean_env

import prtoggle
from fixes.benchmarks import hidden_states_pool_cost as bench


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


def test_fixed_result_is_well_formed() -> None:
    result = bench.measure(QUICK)
    assert_well_formed(result, name="hidden_states_pool_cost", reverted=[])
    assert result.shape["capture_bs"] == [1, 2, 4]
    assert result.shape["bs"] == 4


def test_reverted_runs_without_failing() -> None:
    with prtoggle.reverted(22832):
        result = bench.measure(QUICK)
    assert_well_formed(result, name="hidden_states_pool_cost", reverted=[22832])

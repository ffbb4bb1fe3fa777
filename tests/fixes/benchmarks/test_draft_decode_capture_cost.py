"""Tests for the #26521 fix-cost benchmark: draft-decode capture metadata."""

from __future__ import annotations

import pytest
from bench_support import QUICK, assert_paired, assert_well_formed, clean_env, paired

import prtoggle
from fixes.benchmarks import draft_decode_capture_cost as bench


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


def test_fixed_result_is_well_formed() -> None:
    result = bench.measure(QUICK)
    assert_well_formed(result, name="draft_decode_capture_cost", reverted=[])
    assert result.timed == (
        "TRTLLMHAAttnBackend.init_forward_metadata_capture_cuda_graph, draft decode step 0"
    )
    assert (result.shape["num_steps"], result.shape["seq_lens_fill"]) == (3, 1)


def test_reverted_runs_without_failing() -> None:
    with prtoggle.reverted(26521):
        result = bench.measure(QUICK)
    assert_well_formed(result, name="draft_decode_capture_cost", reverted=[26521])


def test_a_paired_run_times_the_reverted_code_beside_the_fixed() -> None:
    assert_paired(bench.measure(paired(26521)), name="draft_decode_capture_cost", pr=26521)

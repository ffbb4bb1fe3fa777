"""Tests for the #27460 fix-cost benchmark: MLA draft kv_indices rows, time and bytes."""

from __future__ import annotations

import dataclasses

import pytest
from bench_support import QUICK, assert_well_formed, clean_env

import prtoggle
from fixes.benchmarks import kv_indices_width_cost as bench
from prtoggle.errors import PrToggleError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


def test_fixed_buffer_is_topk_times_the_reverted_one() -> None:
    fixed = bench.measure(QUICK)
    with prtoggle.reverted(27460):
        reverted = bench.measure(QUICK)
    assert_well_formed(fixed, name="kv_indices_width_cost", reverted=[])
    assert_well_formed(reverted, name="kv_indices_width_cost", reverted=[27460])
    # 4 steps * 4 requests * 64 entries * 4 bytes, times topk 2 with the fix
    assert fixed.extras == {"cuda_graph_kv_indices_bytes": 8192}
    assert reverted.extras == {"cuda_graph_kv_indices_bytes": 4096}
    assert fixed.shape["topk"] == 2


def test_a_shape_whose_narrow_rows_overflow_is_refused() -> None:
    shape = dataclasses.replace(bench.CPU_SHAPE, seq_len=40)
    with pytest.raises(PrToggleError) as caught:
        bench._require_narrow_rows_fit(shape)
    assert str(caught.value) == (
        "kv_indices_width_cost: rows need 352 entries, more than the reverted width "
        "bs * max_context_len = 256; the reverted code could not run: shorten seq_len"
    )


def test_an_attention_provider_is_refused_with_the_choices() -> None:
    with pytest.raises(PrToggleError) as caught:
        bench.measure(bench.BenchOptions(provider="flashinfer", repeat=1))
    assert str(caught.value) == (
        "kv_indices_width_cost: --provider 'flashinfer' is not supported: expected torch or "
        "triton (the kv_indices kernel; attention is not timed)"
    )

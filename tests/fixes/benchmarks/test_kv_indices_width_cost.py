"""Tests for the #27460 fix-cost benchmark: MLA draft kv_indices rows, time and bytes."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
from bench_support import QUICK, assert_paired, assert_well_formed, clean_env, paired

import prtoggle
from fixes.benchmarks import kv_indices_width_cost as bench
from fixes.benchmarks.common import BenchOptions
from fixes.errors import EngineUsageError


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


def test_a_paired_run_reports_both_buffer_sizes() -> None:
    result = bench.measure(paired(27460))
    assert_paired(result, name="kv_indices_width_cost", pr=27460)
    assert result.extras == {"cuda_graph_kv_indices_bytes": 8192}
    assert result.reverted is not None
    assert result.reverted.extras == {"cuda_graph_kv_indices_bytes": 4096}


def test_a_shape_whose_narrow_rows_overflow_is_refused() -> None:
    shape = dataclasses.replace(bench.CPU_SHAPE, seq_len=40)
    with pytest.raises(EngineUsageError) as caught:
        bench._require_narrow_rows_fit(shape)
    assert str(caught.value) == (
        "kv_indices_width_cost: rows need 352 entries, more than the reverted width "
        "bs * max_context_len = 256; the reverted code could not run: shorten seq_len"
    )


def test_an_attention_provider_is_refused_with_the_choices() -> None:
    with pytest.raises(EngineUsageError) as caught:
        bench.measure(BenchOptions(provider="flashinfer", repeat=1))
    assert str(caught.value) == (
        "kv_indices_width_cost: --provider 'flashinfer' is not supported: expected torch or "
        "triton (the kv_indices kernel; attention is not timed)"
    )


def test_narrow_rows_hold_the_same_kv_indices_as_wide_ones() -> None:
    """The benchmark's sequences fit the reverted rows: both variants fill the same entries."""
    import torch

    from fixes.kernels.draft_kv_indices import draft_kv_indices_row_len

    shape, device = bench.CPU_SHAPE, torch.device("cpu")
    rows_by_variant = []
    for revert in (False, True):
        with prtoggle.reverted(27460) if revert else contextlib.nullcontext():
            backend, rows = bench._build_backend(shape, device=device, provider="torch")
            backend.init_cuda_graph_state(shape.bs, shape.bs * shape.topk)
            batch = bench._draft_batch(backend, shape, rows=rows, device=device)
            backend.init_forward_metadata_replay_cuda_graph(batch)
            buffer = backend.cuda_graph_kv_indices
            assert buffer is not None
            rows_by_variant.append(
                [
                    buffer[
                        step,
                        : draft_kv_indices_row_len(
                            seq_lens_sum=shape.bs * shape.seq_len,
                            topk=shape.topk,
                            num_seqs=shape.bs,
                            step=step,
                        ),
                    ].clone()
                    for step in range(shape.num_steps)
                ]
            )
    for fixed_row, reverted_row in zip(*rows_by_variant, strict=True):
        assert torch.equal(fixed_row, reverted_row)

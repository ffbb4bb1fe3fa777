"""Tests for the #24856 fix-cost benchmark: forward_extend of an equal-length draft extend."""

from __future__ import annotations

import pytest
from bench_support import QUICK, assert_paired, assert_well_formed, clean_env, paired

import prtoggle
from fixes.attention import trtllm_mha_backend
from fixes.benchmarks import draft_extend_routing_cost as bench


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record which TRT-LLM kernel forward_extend calls (then run the real one)."""
    calls: list[str] = []
    for kind in ("decode", "context"):
        name = f"trtllm_batch_{kind}_with_kv_cache"
        real = getattr(trtllm_mha_backend, name)

        def spy(*args: object, _real: object = real, _kind: str = kind, **kwargs: object) -> object:
            calls.append(_kind)
            return _real(*args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(trtllm_mha_backend, name, spy)
    return calls


def test_fixed_times_the_context_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = kernel_calls(monkeypatch)
    result = bench.measure(QUICK)
    assert_well_formed(result, name="draft_extend_routing_cost", reverted=[])
    assert set(calls) == {"context"}
    assert result.timed == (
        "TRTLLMHAAttnBackend.forward_extend, DRAFT_EXTEND_V2, equal accept lengths"
    )
    assert result.shape == {
        "bs": 4,
        "context_len": 256,
        "num_q_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 32,
        "page_size": 16,
        "dtype": "float32",
        "accept_length": 4,
        "provider": "default",
    }


def test_reverted_runs_the_decode_kernel_without_failing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = kernel_calls(monkeypatch)
    with prtoggle.reverted(24856):
        result = bench.measure(QUICK)
    assert_well_formed(result, name="draft_extend_routing_cost", reverted=[24856])
    assert set(calls) == {"decode"}


def test_both_kernels_give_the_same_output_on_the_benchmark_batch() -> None:
    """Equal accept lengths are what make the reverted path correct, not just fast."""
    import torch

    from fixes.benchmarks.trtllm_state import CPU_SHAPE, build_draft_extend_state

    state = build_draft_extend_state(
        CPU_SHAPE,
        accept_lengths=[bench.ACCEPT_LENGTH] * 4,
        device=torch.device("cpu"),
        provider=None,
    )
    fixed = state.forward_extend()
    with prtoggle.reverted(24856):
        reverted = state.forward_extend()
    assert torch.isfinite(fixed).all()
    torch.testing.assert_close(reverted, fixed, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_on_cuda_both_kernels_agree_on_the_realistic_batch() -> None:
    import torch

    from fixes.benchmarks.trtllm_state import CUDA_SHAPE, build_draft_extend_state

    state = build_draft_extend_state(
        CUDA_SHAPE,
        accept_lengths=[bench.ACCEPT_LENGTH] * CUDA_SHAPE.bs,
        device=torch.device("cuda"),
        provider="triton",
    )
    fixed = state.forward_extend()
    with prtoggle.reverted(24856):
        reverted = state.forward_extend()
    assert torch.isfinite(fixed.float()).all()
    torch.testing.assert_close(reverted.float(), fixed.float(), rtol=2e-2, atol=2e-2)


def test_a_paired_run_times_the_reverted_code_beside_the_fixed() -> None:
    assert_paired(bench.measure(paired(24856)), name="draft_extend_routing_cost", pr=24856)

"""Shared steps of the TRT-LLM MHA scenarios: start-up, prefill, and reference comparison."""

from __future__ import annotations

import torch

import prtoggle
from fixes.attention.trtllm_mha_backend import TRTLLMHAAttnBackend
from fixes.model.toy_requests import ToyRequest, ToyStack
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome
from prtoggle import detect

__all__ = [
    "REFERENCE_ATOL",
    "compare_with_reference",
    "prefill",
    "start_scenario",
]

REFERENCE_ATOL = 1e-3
"""Largest |paged - dense| allowed (float32 toy model; Triton/flashinfer sum in other orders)."""


def start_scenario(options: ScenarioOptions) -> torch.device:
    """Apply SGLANG_DEBUG_REVERT_PR (before any capture), clear the witness table."""
    prtoggle.maybe_revert_pr_fix()
    detect.reset()
    device = torch.device(options.device)
    detect.prepare_device(device)
    return device


def prefill(
    stack: ToyStack,
    backend: TRTLLMHAAttnBackend,
    requests: list[ToyRequest],
    tokens: list[list[int]],
) -> torch.Tensor:
    """Eager EXTEND of `tokens` into `requests` (KV written to the pool); check() after."""
    batch = stack.extend_batch(requests, tokens)
    backend.init_forward_metadata(batch)
    hidden = stack.model.forward(batch, backend)
    detect.check()
    return hidden


def compare_with_reference(
    actual: torch.Tensor, expected: torch.Tensor, *, site: str
) -> ScenarioOutcome | None:
    """None when `actual` matches `expected`; otherwise a failure naming `site`."""
    actual, expected = actual.detach().float().cpu(), expected.detach().float().cpu()
    if actual.shape != expected.shape:
        return ScenarioOutcome(
            outcome="failure",
            error="MismatchWithReference",
            site=site,
            message=f"shape {tuple(actual.shape)}, reference {tuple(expected.shape)}",
        )
    finite = bool(torch.isfinite(actual).all())
    error = float((actual - expected).abs().max()) if actual.numel() and finite else 0.0
    if finite and error <= REFERENCE_ATOL:
        return None
    detail = "non-finite values" if not finite else f"max |error| {error:.3g}"
    return ScenarioOutcome(
        outcome="failure",
        error="MismatchWithReference",
        site=site,
        message=f"{detail} against the dense torch reference (atol {REFERENCE_ATOL})",
    )

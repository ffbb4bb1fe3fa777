"""PR #24856: TRT-LLM MHA draft extend (unequal accept lengths) must use the context kernel."""

from __future__ import annotations

import torch

from fixes.attention.trtllm_mha_backend import TRTLLMHAAttnBackend
from fixes.forward_batch import DraftExtendInput, ForwardBatch, ForwardMode, VerifyInput
from fixes.model.toy_requests import ToyRequest, ToyStack, build_stack, random_tokens
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome, run_scenario_main
from fixes.scenarios.trtllm_scenario_support import (
    compare_with_reference,
    prefill,
    start_scenario,
)
from prtoggle import detect

PREFIX_LENS = [6, 4, 9, 5]
DRAFT_TOKEN_NUM = 4
ACCEPT_LENGTHS = [1, 3, 2, 4]


def run(options: ScenarioOptions) -> ScenarioOutcome:
    """Prefill, target verify (decode kernel), then draft extend with accept lengths 1,3,2,4."""
    device = start_scenario(options)
    stack = build_stack(device=device)
    vocab = stack.model.config.vocab_size
    requests = stack.new_requests(len(PREFIX_LENS))
    backend = TRTLLMHAAttnBackend(
        req_to_token_pool=stack.req_to_token_pool,
        token_to_kv_pool=stack.token_to_kv_pool,
        provider=options.provider,
    )
    prefill(stack, backend, requests, random_tokens(PREFIX_LENS, vocab_size=vocab, seed=21))
    prefix_tokens = [list(r.token_ids) for r in requests]
    drafts = random_tokens([DRAFT_TOKEN_NUM] * len(requests), vocab_size=vocab, seed=22)
    verify_counts = [DRAFT_TOKEN_NUM] * len(requests)
    verify_out = _forward(
        stack,
        backend,
        stack.extend_batch(
            requests,
            drafts,
            mode=ForwardMode.TARGET_VERIFY,
            spec_info=VerifyInput(draft_token_num=DRAFT_TOKEN_NUM),
        ),
    )
    verify_ref = _reference_tails(stack, requests, verify_counts)
    # The draft model re-runs the accepted tokens (its own KV rows for them).
    for request, prefix in zip(requests, prefix_tokens, strict=True):
        request.token_ids[:] = prefix
    extend_out = _forward(
        stack,
        backend,
        stack.extend_batch(
            requests,
            [d[:n] for d, n in zip(drafts, ACCEPT_LENGTHS, strict=True)],
            mode=ForwardMode.DRAFT_EXTEND_V2,
            spec_info=DraftExtendInput(
                accept_lengths=torch.tensor(ACCEPT_LENGTHS, dtype=torch.int32, device=device),
                accept_lengths_cpu=list(ACCEPT_LENGTHS),
            ),
        ),
    )
    extend_ref = _reference_tails(stack, requests, ACCEPT_LENGTHS)
    mismatch = compare_with_reference(
        verify_out, verify_ref, site="target_verify.output"
    ) or compare_with_reference(extend_out, extend_ref, site="draft_extend.output")
    if mismatch is not None:
        return mismatch
    return ScenarioOutcome(
        outcome="clean",
        message=f"target verify ({DRAFT_TOKEN_NUM} tokens/request) and draft extend "
        f"(accept lengths {ACCEPT_LENGTHS}) match the dense reference",
    )


def _forward(stack: ToyStack, backend: TRTLLMHAAttnBackend, batch: ForwardBatch) -> torch.Tensor:
    """Eager metadata, model forward, then `detect.check()` (end of step)."""
    backend.init_forward_metadata(batch)
    hidden = stack.model.forward(batch, backend)
    detect.check()
    return hidden


def _reference_tails(
    stack: ToyStack, requests: list[ToyRequest], counts: list[int]
) -> torch.Tensor:
    """Dense hidden states of the last `counts[b]` tokens of each request."""
    return torch.cat(
        [
            stack.model.reference(torch.tensor(r.token_ids, device=stack.device))[-n:]
            for r, n in zip(requests, counts, strict=True)
        ]
    )


if __name__ == "__main__":
    run_scenario_main(run, description=__doc__ or "")

"""PR #24856: TRT-LLM MHA draft extend (unequal accept lengths) must use the context kernel."""

from __future__ import annotations

import torch

from fixes.attention.toy_requests import build_stack, random_tokens
from fixes.attention.trtllm_mha_backend import TRTLLMHAAttnBackend
from fixes.forward_batch import DraftExtendInput, ForwardMode, VerifyInput
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
        req_to_token_pool=stack.req_to_token_pool, token_to_kv_pool=stack.token_to_kv_pool,
        provider=options.provider,
    )
    prefill(stack, backend, requests, random_tokens(PREFIX_LENS, vocab_size=vocab, seed=21))
    prefix_tokens = [list(r.token_ids) for r in requests]

    drafts = random_tokens([DRAFT_TOKEN_NUM] * len(requests), vocab_size=vocab, seed=22)
    verify = stack.extend_batch(
        requests, drafts, mode=ForwardMode.TARGET_VERIFY,
        spec_info=VerifyInput(draft_token_num=DRAFT_TOKEN_NUM),
    )
    backend.init_forward_metadata(verify)
    verify_out = stack.model.forward(verify, backend)
    detect.check()
    verify_ref = torch.cat([
        stack.model.reference(torch.tensor(r.token_ids, device=device))[-DRAFT_TOKEN_NUM:]
        for r in requests
    ])

    # The draft model re-runs the accepted tokens (its own KV rows for them).
    for request, prefix in zip(requests, prefix_tokens, strict=True):
        request.token_ids[:] = prefix
    accepted = [d[:n] for d, n in zip(drafts, ACCEPT_LENGTHS, strict=True)]
    extend = stack.extend_batch(
        requests, accepted, mode=ForwardMode.DRAFT_EXTEND_V2,
        spec_info=DraftExtendInput(
            accept_lengths=torch.tensor(ACCEPT_LENGTHS, dtype=torch.int32, device=device),
            accept_lengths_cpu=list(ACCEPT_LENGTHS),
        ),
    )
    backend.init_forward_metadata(extend)
    extend_out = stack.model.forward(extend, backend)
    detect.check()
    extend_ref = torch.cat([
        stack.model.reference(torch.tensor(r.token_ids, device=device))[-n:]
        for r, n in zip(requests, ACCEPT_LENGTHS, strict=True)
    ])
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


if __name__ == "__main__":
    run_scenario_main(run, description=__doc__ or "")

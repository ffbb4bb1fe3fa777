"""PR #26521: CUDA graph capture of TRT-LLM MHA multi-step draft decode (capture-time seq_lens)."""

from __future__ import annotations

import torch

from fixes.attention.trtllm_mha_backend import (
    TRTLLMHAAttnBackend,
    TRTLLMHAAttnMultiStepDraftBackend,
)
from fixes.cuda_graph.draft_decode_runner import DraftDecodeGraphRunner
from fixes.memory_pool import PADDING_PAGE
from fixes.model.toy_requests import ToyRequest, ToyStack, build_stack, random_tokens
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome, run_scenario_main
from fixes.scenarios.trtllm_scenario_support import (
    compare_with_reference,
    prefill,
    start_scenario,
)
from prtoggle import detect

PREFIX_LENS = [5, 9, 3]
NUM_STEPS = 3
CAPTURE_BATCH_SIZES = [1, 2, 4]


def run(options: ScenarioOptions) -> ScenarioOutcome:
    """Prefill, capture draft decode graphs, replay a padded batch, compare with dense."""
    device = start_scenario(options)
    stack = build_stack(device=device)
    vocab = stack.model.config.vocab_size
    requests = stack.new_requests(len(PREFIX_LENS))
    target = TRTLLMHAAttnBackend(
        req_to_token_pool=stack.req_to_token_pool,
        token_to_kv_pool=stack.token_to_kv_pool,
        provider=options.provider,
    )
    prefill(stack, target, requests, random_tokens(PREFIX_LENS, vocab_size=vocab, seed=11))
    runner = DraftDecodeGraphRunner(
        model=stack.model,
        draft_backend=TRTLLMHAAttnMultiStepDraftBackend(
            req_to_token_pool=stack.req_to_token_pool,
            token_to_kv_pool=stack.token_to_kv_pool,
            num_steps=NUM_STEPS,
            provider=options.provider,
        ),
        req_to_token_pool=stack.req_to_token_pool,
        token_to_kv_pool=stack.token_to_kv_pool,
        capture_batch_sizes=CAPTURE_BATCH_SIZES,
    )
    runner.capture()  # detect.check() after each batch size
    corrupted = _padding_page_outcome(stack)
    if corrupted is not None:
        return corrupted
    drafts = random_tokens([NUM_STEPS] * len(requests), vocab_size=vocab, seed=12)
    output = runner.replay(stack.draft_decode_batches(requests, drafts, num_steps=NUM_STEPS))
    detect.check()
    mismatch = compare_with_reference(
        output, _reference(stack, requests, drafts), site="draft_decode.replay.output"
    )
    if mismatch is not None:
        return mismatch
    return ScenarioOutcome(
        outcome="clean",
        message=f"captured bs {CAPTURE_BATCH_SIZES}, replayed bs={len(requests)} for "
        f"{NUM_STEPS} draft steps; matches the dense reference",
    )


def _reference(
    stack: ToyStack, requests: list[ToyRequest], drafts: list[list[int]]
) -> torch.Tensor:
    """`[num_steps, bs, hidden]`: step i of request b sees its prefix and drafts 0..i."""
    rows = []
    for request, draft in zip(requests, drafts, strict=True):
        sequence = torch.tensor(request.token_ids + draft, device=stack.device)
        rows.append(stack.model.reference(sequence)[len(request.token_ids) :])
    return torch.stack(rows, dim=1)


def _padding_page_outcome(stack: ToyStack) -> ScenarioOutcome | None:
    """After capture, the padding page (which takes capture-time K/V) must be finite.

    Without detection this is where the reverted fix shows: the warm-up NaN of layer 0
    becomes NaN K/V of the next layer, written into the padding page during capture
    (a padded replay later overwrites it, so replay outputs alone stay correct).
    """
    pool = stack.token_to_kv_pool
    for layer in range(pool.num_layers):
        k_cache, v_cache = pool.get_kv_buffer(layer)
        page = torch.stack([k_cache[PADDING_PAGE], v_cache[PADDING_PAGE]])
        if not bool(torch.isfinite(page).all()):
            return ScenarioOutcome(
                outcome="failure",
                error="MismatchWithReference",
                site=f"kv_pool.layer[{layer}].padding_page",
                message="non-finite K/V written into the padding page (capture-time "
                "draft decode produced NaN)",
            )
    return None


if __name__ == "__main__":
    run_scenario_main(run, description=__doc__ or "")

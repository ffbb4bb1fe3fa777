"""PR #22832: multi-layer EAGLE draft extend must pool hidden states from the path that ran."""

from __future__ import annotations

import torch

import prtoggle
from fixes.cuda_graph.draft_extend_runner import build_draft_extend_graph_runner
from fixes.errors import EngineUsageError
from fixes.model.draft_model import draft_models, reference_draft_extend
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome, run_scenario_main
from fixes.speculative.eagle_batches import draft_extend_after_verify
from fixes.speculative.multi_layer_eagle_worker_v2 import MultiLayerEagleWorkerV2, VerifyResult
from prtoggle import detect

NUM_STEPS = 3
TOPK = 2
HIDDEN = 16
VOCAB = 32
POOL_ROWS = 8
CAPTURE_BS = (1, 2)
GRAPH_BATCH = ((1, 2), (5, 4))  # (pool row, accept length) per request: fits the graphs
EAGER_BATCH = ((0, 1), (2, 3), (3, 2), (6, 4))  # larger than the largest captured batch
ATOL = 1e-4


def run(options: ScenarioOptions) -> ScenarioOutcome:
    """Capture draft extend for bs <= 2, run a batch of 2 (graph) then 4 (eager); check the pool."""
    prtoggle.maybe_revert_pr_fix()
    detect.reset()
    device = torch.device(options.device)
    detect.prepare_device(device)
    provider = _hidden_states_provider(options, device)
    models = draft_models(
        num_steps=NUM_STEPS, hidden_size=HIDDEN, vocab_size=VOCAB, seed=22832, device=device
    )
    runner = build_draft_extend_graph_runner(
        models, capture_bs=CAPTURE_BS, tokens_per_req=NUM_STEPS + 1, topk=TOPK
    )
    detect.check()
    worker = MultiLayerEagleWorkerV2(
        draft_models=models,
        topk=TOPK,
        pool_rows=POOL_ROWS,
        cuda_graph_runner_for_draft_extend=runner,
        hidden_states_provider=provider,
    )
    generator = torch.Generator().manual_seed(7)
    for name, batch in (("graph", GRAPH_BATCH), ("eager", EAGER_BATCH)):
        failure = _run_batch(worker, batch, generator=generator, device=device, name=name)
        if failure is not None:
            return failure
    return ScenarioOutcome(
        outcome="clean",
        message=f"hidden-state pool matches the reference after a graph batch of "
        f"{len(GRAPH_BATCH)} and an eager batch of {len(EAGER_BATCH)} ({provider})",
    )


def _run_batch(
    worker: MultiLayerEagleWorkerV2,
    batch: tuple[tuple[int, int], ...],
    *,
    generator: torch.Generator,
    device: torch.device,
    name: str,
) -> ScenarioOutcome | None:
    """One draft extend; None when the pool and the drafts match the plain reference."""
    forward_batch, verify = draft_extend_after_verify(
        rows=[row for row, _ in batch],
        accept_lengths=[length for _, length in batch],
        num_steps=NUM_STEPS,
        hidden_size=HIDDEN,
        vocab_size=VOCAB,
        prefix_len=10,
        pool_rows=POOL_ROWS,
        max_context_len=16,
        generator=generator,
        device=device,
    )
    expected_pool = worker.req_to_hidden_states_pool.clone()
    outputs = reference_draft_extend(
        worker.draft_models,
        input_ids=verify.next_token_ids,
        hidden_states=verify.hidden_states,
        select_index=_select_index(verify),
        tokens_per_req=worker.tokens_per_req,
    )
    windows = outputs[-1].hidden_states.view(len(batch), worker.tokens_per_req, HIDDEN)
    for index, (row, _) in enumerate(batch):
        expected_pool[row] = windows[index, -(NUM_STEPS - 1) :]
    result = worker._draft_extend_for_decode(forward_batch, verify)
    detect.check()
    expected_ids = torch.stack([out.logits[_select_index(verify)].argmax(-1) for out in outputs])
    if not torch.equal(result.topk_index[:, ::TOPK].cpu(), expected_ids.T.cpu()):
        return _mismatch(f"multi_layer_eagle.draft_extend[{name}].topk_index", "draft tokens")
    error = (worker.req_to_hidden_states_pool - expected_pool).abs().nan_to_num(float("inf"))
    if float(error.max()) > ATOL:
        wrong = sorted({int(r) for r in (error > ATOL).nonzero()[:, 0].tolist()})
        return _mismatch(
            f"multi_layer_eagle.req_to_hidden_states_pool[{name}]",
            f"pool rows {wrong} (batch rows {[row for row, _ in batch]})",
        )
    return None


def _select_index(verify: VerifyResult) -> torch.Tensor:
    per_req = NUM_STEPS + 1
    requests = torch.arange(verify.accept_lens.shape[0], device=verify.accept_lens.device)
    return requests * per_req + verify.accept_lens - 1


def _hidden_states_provider(options: ScenarioOptions, device: torch.device) -> str:
    if options.provider is None:
        return "torch" if device.type == "cpu" else "triton"
    if options.provider not in ("torch", "triton"):
        raise EngineUsageError(
            f"eagle_hidden_states_pool: --provider {options.provider!r} is not supported: "
            "expected torch or triton"
        )
    return options.provider


def _mismatch(site: str, what: str) -> ScenarioOutcome:
    return ScenarioOutcome(
        outcome="failure",
        error="MismatchWithReference",
        site=site,
        message=f"{what} differ from the plain reference draft extend (atol {ATOL})",
    )


if __name__ == "__main__":
    run_scenario_main(
        run,
        description="PR #22832: a draft-extend batch larger than the captured graphs must "
        "pool hidden states from the eager output, not from stale graph buffers.",
    )

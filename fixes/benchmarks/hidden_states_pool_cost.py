"""PR #22832 cost: hidden-state pool fed by the path that ran (fixed) or the graph (reverted)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fixes.benchmarks import common
from fixes.cuda_graph.draft_extend_runner import build_draft_extend_graph_runner
from fixes.errors import EngineUsageError
from fixes.forward_batch import ForwardBatch
from fixes.model.draft_model import draft_models
from fixes.speculative.eagle_batches import draft_extend_after_verify
from fixes.speculative.multi_layer_eagle_worker_v2 import MultiLayerEagleWorkerV2, VerifyResult

ACCEPT_CYCLE = (1, 3, 2, 4)


@dataclass(frozen=True)
class EagleShape:
    """Batch (no larger than the largest captured graph), draft steps, model sizes."""

    bs: int
    capture_bs: tuple[int, ...]
    num_steps: int
    topk: int
    hidden_size: int
    vocab_size: int

    def record(self) -> dict[str, common.ShapeValue]:
        return common.shape_of(
            bs=self.bs,
            capture_bs=list(self.capture_bs),
            num_steps=self.num_steps,
            topk=self.topk,
            hidden_size=self.hidden_size,
            vocab_size=self.vocab_size,
            accept_length_cycle=list(ACCEPT_CYCLE),
        )


CPU_SHAPE = EagleShape(
    bs=4, capture_bs=(1, 2, 4), num_steps=3, topk=2, hidden_size=16, vocab_size=32
)
CUDA_SHAPE = EagleShape(
    bs=32, capture_bs=(8, 16, 32), num_steps=4, topk=2, hidden_size=1024, vocab_size=4096
)


def measure(options: common.BenchOptions) -> common.BenchResult:
    """Time `_draft_extend_for_decode` on a batch the captured draft-extend graphs run."""
    device = common.bench_device(options)
    shape = CUDA_SHAPE if device.type == "cuda" else CPU_SHAPE
    provider = common.torch_or_triton_provider(options, bench="hidden_states_pool_cost")
    models = draft_models(
        num_steps=shape.num_steps,
        hidden_size=shape.hidden_size,
        vocab_size=shape.vocab_size,
        seed=22832,
        device=device,
    )
    runner = build_draft_extend_graph_runner(
        models,
        capture_bs=shape.capture_bs,
        tokens_per_req=shape.num_steps + 1,
        topk=shape.topk,
    )
    worker = MultiLayerEagleWorkerV2(
        draft_models=models,
        topk=shape.topk,
        pool_rows=shape.bs,
        cuda_graph_runner_for_draft_extend=runner,
        hidden_states_provider=provider,
    )
    forward_batch, verify = graph_batch(shape, device=device)
    if not runner.can_run(forward_batch):
        raise EngineUsageError(
            f"hidden_states_pool_cost: batch of {shape.bs} does not fit the "
            f"graphs captured for {shape.capture_bs}"
        )
    timing = common.time_pair(
        lambda: worker._draft_extend_for_decode(forward_batch, verify),
        device=device,
        options=options,
    )
    return common.make_result(
        name="hidden_states_pool_cost",
        timed="MultiLayerEagleWorkerV2._draft_extend_for_decode, batch run by CUDA graphs",
        timing=timing,
        pr=options.pr,
        shape=shape.record() | {"hidden_states_provider": provider},
        note="a graph-run batch takes the same inputs either way: expect ~1.0",
    )


def graph_batch(shape: EagleShape, *, device: torch.device) -> tuple[ForwardBatch, VerifyResult]:
    """The timed draft-extend batch: `shape.bs` requests (pool rows 0..bs-1), prefixes of 64."""
    return draft_extend_after_verify(
        rows=range(shape.bs),
        accept_lengths=[ACCEPT_CYCLE[b % len(ACCEPT_CYCLE)] for b in range(shape.bs)],
        num_steps=shape.num_steps,
        hidden_size=shape.hidden_size,
        vocab_size=shape.vocab_size,
        prefix_len=64,
        pool_rows=shape.bs,
        max_context_len=128,
        generator=torch.Generator().manual_seed(7),
        device=device,
    )


if __name__ == "__main__":
    common.run_bench_main(measure, description=__doc__ or "")

"""PR #22832 cost: hidden-state pool fed by the path that ran (fixed) or the graph (reverted)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fixes.benchmarks.common import (
    BenchOptions,
    BenchResult,
    ShapeValue,
    bench_device,
    make_result,
    run_bench_main,
    shape_of,
    time_pair,
    torch_or_triton_provider,
)
from fixes.cuda_graph.draft_extend_runner import build_draft_extend_graph_runner
from fixes.errors import EngineUsageError
from fixes.forward_batch import DraftExtendInput, ForwardBatch, ForwardMode
from fixes.memory_pool import MHATokenToKVPool, ReqToTokenPool
from fixes.model.draft_model import draft_models
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

    def record(self) -> dict[str, ShapeValue]:
        return shape_of(
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


def measure(options: BenchOptions) -> BenchResult:
    """Time `_draft_extend_for_decode` on a batch the captured draft-extend graphs run."""
    device = bench_device(options)
    shape = CUDA_SHAPE if device.type == "cuda" else CPU_SHAPE
    provider = torch_or_triton_provider(options, bench="hidden_states_pool_cost")
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
    forward_batch, verify = _batch(shape, device=device)
    if not runner.can_run(forward_batch):
        raise EngineUsageError(
            f"hidden_states_pool_cost: batch of {shape.bs} does not fit the "
            f"graphs captured for {shape.capture_bs}"
        )
    timing = time_pair(
        lambda: worker._draft_extend_for_decode(forward_batch, verify),
        device=device,
        options=options,
    )
    return make_result(
        name="hidden_states_pool_cost",
        timed="MultiLayerEagleWorkerV2._draft_extend_for_decode, batch run by CUDA graphs",
        timing=timing,
        pr=options.pr,
        shape=shape.record() | {"hidden_states_provider": provider},
        note="a graph-run batch takes the same inputs either way: expect ~1.0",
    )


def _batch(shape: EagleShape, *, device: torch.device) -> tuple[ForwardBatch, VerifyResult]:
    per_req = shape.num_steps + 1
    num_tokens = shape.bs * per_req
    accept = [ACCEPT_CYCLE[b % len(ACCEPT_CYCLE)] for b in range(shape.bs)]
    generator = torch.Generator().manual_seed(7)
    verify = VerifyResult(
        hidden_states=torch.randn(num_tokens, shape.hidden_size, generator=generator).to(device),
        next_token_ids=torch.randint(0, shape.vocab_size, (num_tokens,), generator=generator).to(
            device
        ),
        accept_lens=torch.tensor(accept, dtype=torch.int64, device=device),
    )
    seq_lens = torch.full((shape.bs,), 64, dtype=torch.int32)
    forward_batch = ForwardBatch(
        forward_mode=ForwardMode.DRAFT_EXTEND_V2,
        batch_size=shape.bs,
        input_ids=verify.next_token_ids,
        req_pool_indices=torch.arange(shape.bs, dtype=torch.int64, device=device),
        seq_lens=seq_lens.to(device),
        seq_lens_cpu=seq_lens,
        out_cache_loc=torch.zeros(num_tokens, dtype=torch.int64, device=device),
        positions=torch.zeros(num_tokens, dtype=torch.int64, device=device),
        req_to_token_pool=ReqToTokenPool(size=shape.bs, max_context_len=128, device=device),
        token_to_kv_pool=MHATokenToKVPool(
            num_pages=2,
            page_size=1,
            num_kv_heads=1,
            head_dim=4,
            num_layers=1,
            dtype=torch.float32,
            device=device,
        ),
        extend_seq_lens=torch.full((shape.bs,), per_req, dtype=torch.int32, device=device),
        extend_start_loc=torch.arange(0, num_tokens, per_req, dtype=torch.int32, device=device),
        extend_seq_lens_cpu=[per_req] * shape.bs,
        spec_info=DraftExtendInput(
            accept_lengths=torch.tensor(accept, dtype=torch.int32, device=device),
            accept_lengths_cpu=accept,
        ),
    )
    return forward_batch, verify


if __name__ == "__main__":
    run_bench_main(measure, description=__doc__ or "")

"""PR #27460 cost: MLA draft kv_indices rows topk times wider (fixed) or not (reverted)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

import prtoggle
from fixes.attention.flashinfer_mla_backend import FlashInferMLAMultiStepDraftBackend
from fixes.benchmarks import common
from fixes.errors import AttentionBackendError, EngineUsageError
from fixes.forward_batch import DraftDecodeInput, ForwardBatch, ForwardMode
from fixes.kernels.draft_kv_indices import draft_kv_indices_row_len
from fixes.kernels.mla_attention import MLAShape
from fixes.memory_pool import MLATokenToKVPool, PagedTokenAllocator, ReqToTokenPool


@dataclass(frozen=True)
class DraftShape:
    """Requests, branches, steps and lengths; `seq_len` is short enough for narrow rows."""

    bs: int
    topk: int
    num_steps: int
    max_context_len: int
    seq_len: int
    num_heads: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    dtype: torch.dtype

    def record(self) -> dict[str, common.ShapeValue]:
        return common.shape_of(
            bs=self.bs,
            topk=self.topk,
            num_steps=self.num_steps,
            max_context_len=self.max_context_len,
            seq_len=self.seq_len,
            num_heads=self.num_heads,
            kv_lora_rank=self.kv_lora_rank,
            qk_rope_head_dim=self.qk_rope_head_dim,
            dtype=self.dtype,
        )


CPU_SHAPE = DraftShape(
    bs=4,
    topk=2,
    num_steps=4,
    max_context_len=64,
    seq_len=24,
    num_heads=4,
    kv_lora_rank=16,
    qk_rope_head_dim=8,
    dtype=torch.float32,
)
CUDA_SHAPE = DraftShape(
    bs=32,
    topk=4,
    num_steps=4,
    max_context_len=4096,
    seq_len=1000,
    num_heads=16,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    dtype=torch.bfloat16,
)


def measure(options: common.BenchOptions) -> common.BenchResult:
    """Time the graph-replay metadata (`common_template` over the graph kv_indices rows)."""
    device = common.bench_device(options)
    shape = CUDA_SHAPE if device.type == "cuda" else CPU_SHAPE
    _require_narrow_rows_fit(shape)
    provider = common.torch_or_triton_provider(
        options,
        bench="kv_indices_width_cost",
        note=" (the kv_indices kernel; attention is not timed)",
    )
    backend, rows = _build_backend(shape, device=device, provider=provider)
    backend.init_cuda_graph_state(shape.bs, shape.bs * shape.topk)
    buffer = backend.cuda_graph_kv_indices
    if buffer is None:
        raise AttentionBackendError("kv_indices_width_cost: init_cuda_graph_state left no buffer")
    batch = _draft_batch(backend, shape, rows=rows, device=device)
    timing = common.time_pair(
        lambda: backend.init_forward_metadata_replay_cuda_graph(batch),
        device=device,
        options=options,
    )
    return common.make_result(
        name="kv_indices_width_cost",
        timed="FlashInferMLAMultiStepDraftBackend.init_forward_metadata_replay_cuda_graph "
        "(common_template over the CUDA-graph kv_indices rows), topk > 1",
        timing=timing,
        pr=options.pr,
        shape=shape.record() | {"kv_indices_provider": backend.kv_indices_provider},
        extras={"cuda_graph_kv_indices_bytes": buffer.numel() * buffer.element_size()},
        reverted_extras=_reverted_extras(backend, shape, pr=options.pr),
        note="the fix's cost is memory (kv_indices rows topk times wider), not time; both "
        "variants replay into the wide buffer (reverted only skips the row-width check)",
    )


def _reverted_extras(
    backend: FlashInferMLAMultiStepDraftBackend, shape: DraftShape, *, pr: int | None
) -> dict[str, int | float | str]:
    """The kv_indices bytes the reverted `init_cuda_graph_state` allocates (after timing)."""
    if pr is None:
        return {}
    with prtoggle.reverted(pr):
        backend.init_cuda_graph_state(shape.bs, shape.bs * shape.topk)
    buffer = backend.cuda_graph_kv_indices
    if buffer is None:
        raise AttentionBackendError(
            "kv_indices_width_cost: reverted init_cuda_graph_state left no buffer"
        )
    return {"cuda_graph_kv_indices_bytes": buffer.numel() * buffer.element_size()}


def _require_narrow_rows_fit(shape: DraftShape) -> None:
    needed = draft_kv_indices_row_len(
        seq_lens_sum=shape.bs * shape.seq_len,
        topk=shape.topk,
        num_seqs=shape.bs,
        step=shape.num_steps - 1,
    )
    if needed > shape.bs * shape.max_context_len:
        raise EngineUsageError(
            f"kv_indices_width_cost: rows need {needed} entries, more than the reverted "
            f"width bs * max_context_len = {shape.bs * shape.max_context_len}; the reverted "
            "code could not run: shorten seq_len"
        )


def _build_backend(
    shape: DraftShape, *, device: torch.device, provider: str
) -> tuple[FlashInferMLAMultiStepDraftBackend, list[int]]:
    """Pools whose requests hold a prefix and every branch's draft slots."""
    slots_per_req = shape.seq_len + shape.topk * shape.num_steps
    req_to_token_pool = ReqToTokenPool(
        size=shape.bs, max_context_len=shape.max_context_len, device=device
    )
    num_pages = shape.bs * slots_per_req + 1
    kv_pool = MLATokenToKVPool(
        num_pages=num_pages,
        page_size=1,
        kv_lora_rank=shape.kv_lora_rank,
        qk_rope_head_dim=shape.qk_rope_head_dim,
        num_layers=1,
        dtype=shape.dtype,
        device=device,
    )
    allocator = PagedTokenAllocator(num_pages=num_pages, page_size=1, seed=3)
    rows = req_to_token_pool.alloc(shape.bs)
    for row in rows:
        allocator.extend(req_to_token_pool, row=row, old_len=0, new_len=slots_per_req)
    backend = FlashInferMLAMultiStepDraftBackend(
        req_to_token_pool=req_to_token_pool,
        kv_pool=kv_pool,
        shape=MLAShape(
            num_heads=shape.num_heads,
            kv_lora_rank=shape.kv_lora_rank,
            qk_rope_head_dim=shape.qk_rope_head_dim,
            sm_scale=(shape.kv_lora_rank + shape.qk_rope_head_dim) ** -0.5,
        ),
        topk=shape.topk,
        speculative_num_steps=shape.num_steps,
        kv_indices_provider=provider,
    )
    return backend, rows


def _draft_batch(
    backend: FlashInferMLAMultiStepDraftBackend,
    shape: DraftShape,
    *,
    rows: list[int],
    device: torch.device,
) -> ForwardBatch:
    seq_lens_cpu = torch.full((shape.bs,), shape.seq_len, dtype=torch.int32)
    zeros = torch.zeros(shape.bs * shape.topk, dtype=torch.int64, device=device)
    return ForwardBatch(
        forward_mode=ForwardMode.DECODE,
        batch_size=shape.bs,
        input_ids=zeros,
        req_pool_indices=torch.tensor(rows, dtype=torch.int64, device=device),
        seq_lens=seq_lens_cpu.to(device),
        seq_lens_cpu=seq_lens_cpu,
        out_cache_loc=zeros,
        positions=zeros,
        req_to_token_pool=backend.req_to_token_pool,
        token_to_kv_pool=backend.kv_pool,
        spec_info=DraftDecodeInput(topk=shape.topk, num_steps=shape.num_steps),
    )


if __name__ == "__main__":
    common.run_bench_main(measure, description=__doc__ or "")

"""PR #27460: the MLA draft CUDA-graph kv_indices rows must be wide enough for topk > 1."""

from __future__ import annotations

from dataclasses import dataclass

import torch

import prtoggle
from fixes.attention.flashinfer_mla_backend import FlashInferMLAMultiStepDraftBackend
from fixes.cuda_graph.graph import capture
from fixes.errors import EngineUsageError
from fixes.forward_batch import DraftDecodeInput, ForwardBatch, ForwardMode
from fixes.kernels.mla_attention import MLAShape
from fixes.memory_pool import MLATokenToKVPool, PagedTokenAllocator, ReqToTokenPool
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome, run_scenario_main
from prtoggle import detect

Queries = tuple[torch.Tensor, torch.Tensor]
"""Per attention step and (request, branch) row: the nope and rope parts of the query."""

TOPK = 2
NUM_STEPS = 4
MAX_BS = 2
MAX_CONTEXT_LEN = 16
NUM_PAGES = 128
NUM_HEADS = 4
SEQ_LENS = (7, 6)  # rows need 26 + 4 * (step + 1) entries; the unfixed row holds 32
PROVIDERS = {  # --provider: (kv_indices kernel, attention)
    "torch": ("torch", "torch"),
    "triton": ("triton", "torch"),
    "flashinfer": ("triton", "flashinfer"),
}


@dataclass
class MLADraftStack:
    """Pools with two live requests and the multi-step draft backend over them."""

    backend: FlashInferMLAMultiStepDraftBackend
    rows: list[int]
    device: torch.device
    dtype: torch.dtype


def run(options: ScenarioOptions) -> ScenarioOutcome:
    """Capture draft decode for bs 2, replay a topk=2 batch, compare with the eager path."""
    prtoggle.maybe_revert_pr_fix()
    detect.reset()
    device = torch.device(options.device)
    detect.prepare_device(device)
    provider = options.provider or ("torch" if device.type == "cpu" else "triton")
    stack = build_stack(device=device, provider=provider)
    queries = _queries(stack, seed=27460)
    graph_output = run_graph_path(stack, queries)
    detect.check()
    eager_output = run_eager_path(stack, queries)
    detect.check()
    tolerance = 1e-4 if stack.dtype == torch.float32 else 2e-2
    for step in range(stack.backend.num_attention_steps):
        error = (graph_output[step].float() - eager_output[step].float()).abs().max()
        if not bool(error <= tolerance):
            return ScenarioOutcome(
                outcome="failure",
                error="MismatchWithReference",
                site=f"flashinfer_mla.draft_decode[step={step}].output",
                message=f"CUDA-graph output differs from the eager path: max |error| "
                f"{float(error):.3g} (atol {tolerance}), topk {TOPK}, seq_lens {SEQ_LENS}",
            )
    return ScenarioOutcome(
        outcome="clean",
        message=f"graph replay matches eager for {stack.backend.num_attention_steps} draft "
        f"steps, topk {TOPK}, seq_lens {SEQ_LENS} ({provider})",
    )


def build_stack(*, device: torch.device, provider: str) -> MLADraftStack:
    """Two requests whose prefix and per-branch draft slots are spread over the pool."""
    if provider not in PROVIDERS:
        raise EngineUsageError(
            f"mla_draft_kv_indices_width: --provider {provider!r} is unknown: expected one "
            f"of {', '.join(PROVIDERS)}"
        )
    kv_provider, attention_provider = PROVIDERS[provider]
    on_flashinfer = attention_provider == "flashinfer"
    if on_flashinfer and device.type != "cuda":
        raise EngineUsageError(
            f"mla_draft_kv_indices_width: --provider flashinfer needs --device cuda, got "
            f"{device.type}; on CPU use torch or triton (TRITON_INTERPRET=1)"
        )
    dtype = torch.bfloat16 if on_flashinfer else torch.float32
    rank, rope = (512, 64) if on_flashinfer else (16, 8)
    req_to_token_pool = ReqToTokenPool(size=4, max_context_len=MAX_CONTEXT_LEN, device=device)
    kv_pool = MLATokenToKVPool(
        num_pages=NUM_PAGES,
        page_size=1,
        kv_lora_rank=rank,
        qk_rope_head_dim=rope,
        num_layers=1,
        dtype=dtype,
        device=device,
    )
    generator = torch.Generator().manual_seed(1)
    kv_pool.kv_buffers[0].copy_(torch.randn(kv_pool.kv_buffers[0].shape, generator=generator))
    allocator = PagedTokenAllocator(num_pages=NUM_PAGES, page_size=1, seed=3)
    rows = req_to_token_pool.alloc(len(SEQ_LENS))
    for row, seq_len in zip(rows, SEQ_LENS, strict=True):
        allocator.extend(req_to_token_pool, row=row, old_len=0, new_len=seq_len + TOPK * NUM_STEPS)
    backend = FlashInferMLAMultiStepDraftBackend(
        req_to_token_pool=req_to_token_pool,
        kv_pool=kv_pool,
        shape=MLAShape(
            num_heads=NUM_HEADS,
            kv_lora_rank=rank,
            qk_rope_head_dim=rope,
            sm_scale=(rank + rope) ** -0.5,
        ),
        topk=TOPK,
        speculative_num_steps=NUM_STEPS,
        kv_indices_provider=kv_provider,
        attention_provider=attention_provider,
    )
    return MLADraftStack(backend=backend, rows=rows, device=device, dtype=dtype)


def run_graph_path(stack: MLADraftStack, queries: Queries) -> torch.Tensor:
    """Capture with capture-time lengths (1), then replay the live batch; every step's output."""
    backend, device = stack.backend, stack.device
    backend.init_cuda_graph_state(MAX_BS, MAX_BS * TOPK)
    req_pool_indices = torch.zeros(MAX_BS, dtype=torch.int64, device=device)
    seq_lens = torch.ones(MAX_BS, dtype=torch.int32, device=device)
    q_nope, q_pe = (torch.zeros_like(q) for q in queries)
    capture_batch = _draft_batch(stack, req_pool_indices, seq_lens, seq_lens.cpu())
    backend.init_forward_metadata_capture_cuda_graph(capture_batch)

    def forward() -> torch.Tensor:
        return torch.stack(
            [
                backend.forward_decode(step, q_nope[step], q_pe[step])
                for step in range(backend.num_attention_steps)
            ]
        )

    graph = capture(forward, device=device)
    live_seq_lens = torch.tensor(SEQ_LENS, dtype=torch.int32)
    req_pool_indices.copy_(torch.tensor(stack.rows))
    seq_lens.copy_(live_seq_lens)
    q_nope.copy_(queries[0])
    q_pe.copy_(queries[1])
    with detect.phase("replay"):
        backend.init_forward_metadata_replay_cuda_graph(
            _draft_batch(stack, req_pool_indices, seq_lens, live_seq_lens)
        )
    return graph.replay().clone()


def run_eager_path(stack: MLADraftStack, queries: Queries) -> torch.Tensor:
    """The same batch without graphs: a kv_indices buffer sized for this batch."""
    backend = stack.backend
    live_seq_lens = torch.tensor(SEQ_LENS, dtype=torch.int32)
    batch = _draft_batch(
        stack,
        torch.tensor(stack.rows, device=stack.device),
        live_seq_lens.to(stack.device),
        live_seq_lens,
    )
    backend.init_forward_metadata(batch)
    return torch.stack(
        [
            backend.forward_decode(step, queries[0][step], queries[1][step])
            for step in range(backend.num_attention_steps)
        ]
    )


def _draft_batch(
    stack: MLADraftStack,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    seq_lens_cpu: torch.Tensor,
) -> ForwardBatch:
    bs = int(seq_lens.shape[0])
    rows = bs * TOPK
    zeros = torch.zeros(rows, dtype=torch.int64, device=stack.device)
    return ForwardBatch(
        forward_mode=ForwardMode.DECODE,
        batch_size=bs,
        input_ids=zeros,
        req_pool_indices=req_pool_indices,
        seq_lens=seq_lens,
        seq_lens_cpu=seq_lens_cpu,
        out_cache_loc=zeros,
        positions=seq_lens.long().repeat_interleave(TOPK),
        req_to_token_pool=stack.backend.req_to_token_pool,
        token_to_kv_pool=stack.backend.kv_pool,
        spec_info=DraftDecodeInput(topk=TOPK, num_steps=NUM_STEPS),
    )


def _queries(stack: MLADraftStack, *, seed: int) -> Queries:
    """Per attention step, one query per (request, branch) row: nope and rope parts."""
    shape = stack.backend.shape
    generator = torch.Generator().manual_seed(seed)
    leading = (stack.backend.num_attention_steps, len(SEQ_LENS) * TOPK, shape.num_heads)
    q_nope = torch.randn(*leading, shape.kv_lora_rank, generator=generator)
    q_pe = torch.randn(*leading, shape.qk_rope_head_dim, generator=generator)
    return q_nope.to(stack.device, stack.dtype), q_pe.to(stack.device, stack.dtype)


if __name__ == "__main__":
    run_scenario_main(
        run,
        description="PR #27460: topk=2 MLA draft decode through CUDA graphs; the kv_indices "
        "rows must hold seq_lens_sum * topk + bs * (step + 1) entries.",
    )

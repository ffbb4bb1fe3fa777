"""TRT-LLM MHA benchmark state: a paged KV cache of long prefixes and an extend batch over it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fixes.attention.base import AttentionLayer
from fixes.attention.trtllm_mha_backend import TRTLLMHAAttnBackend
from fixes.benchmarks import common
from fixes.forward_batch import DraftExtendInput, ForwardBatch, ForwardMode
from fixes.model.toy_attention_model import ToyModelConfig
from fixes.model.toy_requests import ToyStack, build_stack, random_tokens

__all__ = [
    "AttentionShape",
    "ExtendState",
    "attention_shape",
    "build_draft_extend_state",
    "measure_draft_extend",
]


@dataclass(frozen=True)
class AttentionShape:
    """Sizes of the benchmark: requests, KV length after the extend, heads, pages, dtype."""

    bs: int
    context_len: int  # KV entries per request after the extend (prefix + new tokens)
    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    page_size: int
    dtype: torch.dtype

    def record(self) -> dict[str, common.ShapeValue]:
        return common.shape_of(
            bs=self.bs,
            context_len=self.context_len,
            num_q_heads=self.num_q_heads,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            page_size=self.page_size,
            dtype=self.dtype,
        )


CPU_SHAPE = AttentionShape(
    bs=4,
    context_len=256,
    num_q_heads=4,
    num_kv_heads=2,
    head_dim=32,
    page_size=16,
    dtype=torch.float32,
)
CUDA_SHAPE = AttentionShape(
    bs=32,
    context_len=4096,
    num_q_heads=32,
    num_kv_heads=8,
    head_dim=128,
    page_size=64,
    dtype=torch.bfloat16,
)


@dataclass
class ExtendState:
    """Everything one `forward_extend` call needs, with its metadata already built."""

    stack: ToyStack
    backend: TRTLLMHAAttnBackend
    batch: ForwardBatch
    layer: AttentionLayer
    q: torch.Tensor  # [num_tokens, Hq * D]
    k: torch.Tensor  # [num_tokens, Hkv * D]
    v: torch.Tensor

    def forward_extend(self) -> torch.Tensor:
        """The timed call: attention only (the KV of the new tokens is already in the pool)."""
        return self.backend.forward_extend(
            self.q, self.k, self.v, self.layer, self.batch, save_kv_cache=False
        )


def attention_shape(options: common.BenchOptions) -> AttentionShape:
    """Small on CPU (seconds), realistic on CUDA."""
    return CUDA_SHAPE if options.device == "cuda" else CPU_SHAPE


def build_paged_stack(shape: AttentionShape, *, device: torch.device) -> ToyStack:
    """One-layer pools sized for `shape.bs` requests of `shape.context_len` tokens."""
    pages_per_req = -(-shape.context_len // shape.page_size) + 1
    config = ToyModelConfig(
        num_layers=1,
        num_q_heads=shape.num_q_heads,
        num_kv_heads=shape.num_kv_heads,
        head_dim=shape.head_dim,
    )
    return build_stack(
        device=device,
        config=config,
        num_pages=shape.bs * pages_per_req + 1,
        page_size=shape.page_size,
        max_context_len=pages_per_req * shape.page_size,
        max_requests=shape.bs,
        dtype=shape.dtype,
    )


def build_draft_extend_state(
    shape: AttentionShape,
    *,
    accept_lengths: list[int],
    device: torch.device,
    provider: str | None,
) -> ExtendState:
    """Prefixes of `context_len - accept` tokens in the pool, then a DRAFT_EXTEND_V2 batch."""
    stack = build_paged_stack(shape, device=device)
    requests = stack.new_requests(shape.bs)
    vocab = stack.model.config.vocab_size
    prefix_lens = [shape.context_len - n for n in accept_lengths]
    stack.extend_batch(requests, random_tokens(prefix_lens, vocab_size=vocab, seed=1))
    _fill_kv_pool(stack, seed=2)
    batch = stack.extend_batch(
        requests,
        random_tokens(accept_lengths, vocab_size=vocab, seed=3),
        mode=ForwardMode.DRAFT_EXTEND_V2,
        spec_info=DraftExtendInput(
            accept_lengths=torch.tensor(accept_lengths, dtype=torch.int32, device=device),
            accept_lengths_cpu=list(accept_lengths),
        ),
    )
    backend = TRTLLMHAAttnBackend(
        req_to_token_pool=stack.req_to_token_pool,
        token_to_kv_pool=stack.token_to_kv_pool,
        provider=provider,
    )
    backend.init_forward_metadata(batch)
    return ExtendState(
        stack=stack,
        backend=backend,
        batch=batch,
        layer=_layer(shape),
        **_qkv(shape, num_tokens=batch.num_tokens, device=device),
    )


def measure_draft_extend(
    options: common.BenchOptions,
    *,
    accept_lengths: list[int],
    name: str,
    timed: str,
    shape_extras: dict[str, common.ShapeValue],
    note: str,
) -> common.BenchResult:
    """Time `forward_extend` on a DRAFT_EXTEND_V2 batch with the given accept lengths."""
    device = common.bench_device(options)
    shape = attention_shape(options)
    state = build_draft_extend_state(
        shape, accept_lengths=accept_lengths, device=device, provider=options.provider
    )
    timing = common.time_pair(state.forward_extend, device=device, options=options)
    return common.make_result(
        name=name,
        timed=timed,
        timing=timing,
        pr=options.pr,
        shape={**shape.record(), **shape_extras, "provider": options.provider or "default"},
        note=note,
    )


def _layer(shape: AttentionShape) -> AttentionLayer:
    return AttentionLayer(
        layer_id=0,
        num_q_heads=shape.num_q_heads,
        num_kv_heads=shape.num_kv_heads,
        head_dim=shape.head_dim,
        scaling=shape.head_dim**-0.5,
    )


def _qkv(
    shape: AttentionShape, *, num_tokens: int, device: torch.device
) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(4)
    widths = {"q": shape.num_q_heads, "k": shape.num_kv_heads, "v": shape.num_kv_heads}
    return {
        name: torch.randn(num_tokens, heads * shape.head_dim, generator=generator).to(
            device=device, dtype=shape.dtype
        )
        for name, heads in widths.items()
    }


def _fill_kv_pool(stack: ToyStack, *, seed: int) -> None:
    """Random keys and values in every page (the benchmark reads real numbers, not zeros)."""
    generator = torch.Generator(device=stack.device).manual_seed(seed)
    pool = stack.token_to_kv_pool
    for buffer in (*pool.k_buffers, *pool.v_buffers):
        buffer.copy_(
            torch.randn(buffer.shape, generator=generator, device=stack.device, dtype=buffer.dtype)
        )

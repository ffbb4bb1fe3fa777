"""What every TRT-LLM FMHA provider receives: one arguments dataclass per kernel, and the choices.

The dispatcher (trtllm_fmha.py) validates shapes, dtypes and devices, allocates `out`, and
hands the providers (trtllm_fmha_reference, trtllm_fmha_triton, flashinfer_mha) a
`DecodeArgs` or `ContextArgs`. Providers import this module, never the dispatcher.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

__all__ = ["PROVIDERS", "ContextArgs", "DecodeArgs", "PagedAttentionArgs", "default_provider"]

PROVIDERS: tuple[str, ...] = ("torch", "triton", "flashinfer")


def default_provider(device: torch.device | str) -> str:
    """The provider used when none is named: "torch" on CPU, "triton" on CUDA."""
    return "triton" if torch.device(device).type == "cuda" else "torch"


@dataclass(frozen=True)
class PagedAttentionArgs:
    """Tensors both kernels read and write; all on one device (the query's)."""

    query: torch.Tensor  # [rows, Hq, D] float32/float16/bfloat16, device
    k_cache: torch.Tensor  # [num_pages, page_size, Hkv, D], query's dtype, device
    v_cache: torch.Tensor  # [num_pages, page_size, Hkv, D], query's dtype, device
    block_tables: torch.Tensor  # [bs, max_pages] int32, device: page of request b's page j
    seq_lens: torch.Tensor  # [bs] int32, device: KV length of request b, new tokens included
    softmax_scale: float  # host
    out: torch.Tensor  # [rows, Hq, D], query's dtype, device: the kernel writes its rows

    def for_decode(self, *, q_len_per_req: int, max_seq_len: int) -> DecodeArgs:
        """These tensors with the decode kernel's host parameters."""
        paged = {f.name: getattr(self, f.name) for f in fields(PagedAttentionArgs)}
        return DecodeArgs(**paged, q_len_per_req=q_len_per_req, max_seq_len=max_seq_len)

    def for_context(
        self, *, batch_size: int, cum_seq_lens_q: torch.Tensor, max_q_len: int, max_kv_len: int
    ) -> ContextArgs:
        """These tensors with the context kernel's host parameters and query offsets."""
        paged = {f.name: getattr(self, f.name) for f in fields(PagedAttentionArgs)}
        return ContextArgs(
            **paged,
            batch_size=batch_size,
            cum_seq_lens_q=cum_seq_lens_q,
            max_q_len=max_q_len,
            max_kv_len=max_kv_len,
        )


@dataclass(frozen=True)
class DecodeArgs(PagedAttentionArgs):
    """Decode: `seq_lens.shape[0]` requests of `q_len_per_req` query rows each, unchecked."""

    q_len_per_req: int  # host: query rows per request (row of query i of b: b*q_len_per_req + i)
    max_seq_len: int  # host: upper bound of seq_lens; sizes the KV work split only


@dataclass(frozen=True)
class ContextArgs(PagedAttentionArgs):
    """Context (causal prefill): requests `b < batch_size`, with no bounds checks."""

    batch_size: int  # host: requests the kernel loops over
    cum_seq_lens_q: torch.Tensor  # [>= batch_size + 1] int32, device: first query row of b
    max_q_len: int  # host: rows computed per request (grid size)
    max_kv_len: int  # host: upper bound of seq_lens; sizes the KV work split only

"""Verify results and the DRAFT_EXTEND_V2 batches that follow them, for the EAGLE worker."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fixes.forward_batch import DraftExtendInput, ForwardBatch, ForwardMode
from fixes.memory_pool import MHATokenToKVPool, ReqToTokenPool
from fixes.speculative.multi_layer_eagle_worker_v2 import VerifyResult

__all__ = ["draft_extend_after_verify"]


def draft_extend_after_verify(
    *,
    rows: Sequence[int],
    accept_lengths: Sequence[int],
    num_steps: int,
    hidden_size: int,
    vocab_size: int,
    prefix_len: int,
    pool_rows: int,
    max_context_len: int,
    generator: torch.Generator,
    device: torch.device,
) -> tuple[ForwardBatch, VerifyResult]:
    """A random verify result (`num_steps + 1` tokens per request) and its draft-extend batch.

    Request b uses pool row `rows[b]` and accepted `accept_lengths[b]` tokens; hidden
    states, then next token ids, are drawn from `generator` (CPU) in that order. The KV
    pool is a placeholder: the worker's draft models do not attend.
    """
    bs, per_req = len(rows), num_steps + 1
    num_tokens = bs * per_req
    verify = VerifyResult(
        hidden_states=torch.randn(num_tokens, hidden_size, generator=generator).to(device),
        next_token_ids=torch.randint(0, vocab_size, (num_tokens,), generator=generator).to(device),
        accept_lens=torch.tensor(list(accept_lengths), dtype=torch.int64, device=device),
    )
    seq_lens = torch.full((bs,), prefix_len, dtype=torch.int32)
    forward_batch = ForwardBatch(
        forward_mode=ForwardMode.DRAFT_EXTEND_V2,
        batch_size=bs,
        input_ids=verify.next_token_ids,
        req_pool_indices=torch.tensor(list(rows), dtype=torch.int64, device=device),
        seq_lens=seq_lens.to(device),
        seq_lens_cpu=seq_lens,
        out_cache_loc=torch.zeros(num_tokens, dtype=torch.int64, device=device),
        positions=torch.zeros(num_tokens, dtype=torch.int64, device=device),
        req_to_token_pool=ReqToTokenPool(
            size=pool_rows, max_context_len=max_context_len, device=device
        ),
        token_to_kv_pool=MHATokenToKVPool(
            num_pages=2,
            page_size=1,
            num_kv_heads=1,
            head_dim=4,
            num_layers=1,
            dtype=torch.float32,
            device=device,
        ),
        extend_seq_lens=torch.full((bs,), per_req, dtype=torch.int32, device=device),
        extend_start_loc=torch.arange(0, num_tokens, per_req, dtype=torch.int32, device=device),
        extend_seq_lens_cpu=[per_req] * bs,
        spec_info=DraftExtendInput(
            accept_lengths=torch.tensor(list(accept_lengths), dtype=torch.int32, device=device),
            accept_lengths_cpu=list(accept_lengths),
        ),
    )
    return forward_batch, verify

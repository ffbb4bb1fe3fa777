"""Requests on the toy model: pools, slot allocation and ForwardBatch construction."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from fixes.forward_batch import DraftDecodeInput, ForwardBatch, ForwardMode, SpecInput
from fixes.memory_pool import MHATokenToKVPool, PagedTokenAllocator, ReqToTokenPool
from fixes.model.toy_attention_model import ToyAttentionModel, ToyModelConfig

__all__ = ["ToyRequest", "ToyStack", "build_stack", "random_tokens"]


@dataclass
class ToyRequest:
    """One request: its req_to_token row and every token whose K/V is cached."""

    row: int
    token_ids: list[int] = field(default_factory=list)


@dataclass
class ToyStack:
    """Model, pools and allocator on one device."""

    model: ToyAttentionModel
    req_to_token_pool: ReqToTokenPool
    token_to_kv_pool: MHATokenToKVPool
    allocator: PagedTokenAllocator
    device: torch.device

    def new_requests(self, count: int) -> list[ToyRequest]:
        return [ToyRequest(row=row) for row in self.req_to_token_pool.alloc(count)]

    def extend_batch(
        self,
        requests: list[ToyRequest],
        new_tokens: list[list[int]],
        *,
        mode: ForwardMode = ForwardMode.EXTEND,
        spec_info: SpecInput | None = None,
    ) -> ForwardBatch:
        """A batch appending `new_tokens[b]` to request b (slots allocated, tokens recorded)."""
        prefix = [len(r.token_ids) for r in requests]
        extend = [len(t) for t in new_tokens]
        slots = [
            self.allocator.extend(self.req_to_token_pool, row=r.row, old_len=p, new_len=p + n)
            for r, p, n in zip(requests, prefix, extend, strict=True)
        ]
        for request, tokens in zip(requests, new_tokens, strict=True):
            request.token_ids.extend(tokens)
        seq_lens = [p + n for p, n in zip(prefix, extend, strict=True)]
        positions = [list(range(p, p + n)) for p, n in zip(prefix, extend, strict=True)]
        batch = self._batch(
            mode=mode,
            requests=requests,
            input_ids=_flat(new_tokens),
            seq_lens=seq_lens,
            out_cache_loc=torch.cat(slots) if slots else torch.zeros(0, dtype=torch.int64),
            positions=_flat(positions),
            spec_info=spec_info,
        )
        batch.extend_seq_lens = self._ints(extend, torch.int32)
        batch.extend_prefix_lens = self._ints(prefix, torch.int32)
        starts = [sum(extend[:b]) for b in range(len(extend))]
        batch.extend_start_loc = self._ints(starts, torch.int32)
        batch.extend_seq_lens_cpu = list(extend)
        return batch

    def draft_decode_batches(
        self, requests: list[ToyRequest], draft_tokens: list[list[int]], *, num_steps: int
    ) -> list[ForwardBatch]:
        """One DECODE batch per draft step; `seq_lens` hold the prefix (pre-draft) lengths.

        Slots for all steps are allocated up front; draft tokens are not added to the
        requests' cached tokens (they are speculative).
        """
        prefix = [len(r.token_ids) for r in requests]
        slots = [
            self.allocator.extend(
                self.req_to_token_pool, row=r.row, old_len=p, new_len=p + num_steps
            )
            for r, p in zip(requests, prefix, strict=True)
        ]
        spec_info = DraftDecodeInput(topk=1, num_steps=num_steps)
        return [
            self._batch(
                mode=ForwardMode.DECODE,
                requests=requests,
                input_ids=[tokens[step] for tokens in draft_tokens],
                seq_lens=prefix,
                out_cache_loc=torch.stack([s[step] for s in slots]),
                positions=[p + step for p in prefix],
                spec_info=spec_info,
            )
            for step in range(num_steps)
        ]

    def _batch(
        self,
        *,
        mode: ForwardMode,
        requests: list[ToyRequest],
        input_ids: list[int],
        seq_lens: list[int],
        out_cache_loc: torch.Tensor,
        positions: list[int],
        spec_info: SpecInput | None,
    ) -> ForwardBatch:
        return ForwardBatch(
            forward_mode=mode,
            batch_size=len(requests),
            input_ids=self._ints(input_ids, torch.int64),
            req_pool_indices=self._ints([r.row for r in requests], torch.int64),
            seq_lens=self._ints(seq_lens, torch.int32),
            seq_lens_cpu=torch.tensor(seq_lens, dtype=torch.int32),
            out_cache_loc=out_cache_loc.to(self.device),
            positions=self._ints(positions, torch.int64),
            req_to_token_pool=self.req_to_token_pool,
            token_to_kv_pool=self.token_to_kv_pool,
            spec_info=spec_info,
        )

    def _ints(self, values: list[int], dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=self.device)


def build_stack(
    *,
    device: torch.device,
    config: ToyModelConfig | None = None,
    num_pages: int = 64,
    page_size: int = 4,
    max_context_len: int = 64,
    max_requests: int = 8,
    dtype: torch.dtype = torch.float32,
) -> ToyStack:
    """A toy model with paged pools on `device` (pages shuffled, page 0 kept for padding)."""
    config = config or ToyModelConfig()
    return ToyStack(
        model=ToyAttentionModel(config, device=device, dtype=dtype),
        req_to_token_pool=ReqToTokenPool(
            size=max_requests, max_context_len=max_context_len, device=device
        ),
        token_to_kv_pool=MHATokenToKVPool(
            num_pages=num_pages,
            page_size=page_size,
            num_kv_heads=config.num_kv_heads,
            head_dim=config.head_dim,
            num_layers=config.num_layers,
            dtype=dtype,
            device=device,
        ),
        allocator=PagedTokenAllocator(num_pages=num_pages, page_size=page_size, seed=config.seed),
        device=device,
    )


def random_tokens(lengths: list[int], *, vocab_size: int, seed: int) -> list[list[int]]:
    """Deterministic token lists of the given lengths."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab_size) for _ in range(n)] for n in lengths]


def _flat(nested: list[list[int]]) -> list[int]:
    return [x for inner in nested for x in inner]

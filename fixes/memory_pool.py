"""Request-to-token map, paged KV pools for MHA and MLA, and a page allocator."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from fixes.errors import PoolExhaustedError

PADDING_PAGE = 0
"""Page 0 is never handed out: padded rows of a CUDA graph batch write their KV there."""


@dataclass
class ReqToTokenPool:
    """Maps (request row, token position) to the KV slot holding that token.

    `req_to_token` is `[size, max_context_len]` int32 on `device`; slot = page * page_size
    + offset in page.
    """

    size: int
    max_context_len: int
    device: torch.device
    req_to_token: torch.Tensor = field(init=False)
    _free_rows: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.req_to_token = torch.zeros(
            (self.size, self.max_context_len), dtype=torch.int32, device=self.device
        )
        self._free_rows = list(range(self.size))

    def alloc(self, count: int) -> list[int]:
        """Take `count` free rows."""
        if count > len(self._free_rows):
            raise PoolExhaustedError(
                f"ReqToTokenPool: asked for {count} rows, {len(self._free_rows)} free "
                f"of {self.size}"
            )
        rows, self._free_rows = self._free_rows[:count], self._free_rows[count:]
        return rows

    def free(self, rows: list[int]) -> None:
        self._free_rows.extend(rows)


@dataclass
class MHATokenToKVPool:
    """Paged K and V caches, per layer `[num_pages, page_size, num_kv_heads, head_dim]`."""

    num_pages: int
    page_size: int
    num_kv_heads: int
    head_dim: int
    num_layers: int
    dtype: torch.dtype
    device: torch.device
    k_buffers: list[torch.Tensor] = field(init=False)
    v_buffers: list[torch.Tensor] = field(init=False)

    def __post_init__(self) -> None:
        shape = (self.num_pages, self.page_size, self.num_kv_heads, self.head_dim)
        self.k_buffers = [self._zeros(shape) for _ in range(self.num_layers)]
        self.v_buffers = [self._zeros(shape) for _ in range(self.num_layers)]

    @property
    def num_slots(self) -> int:
        return self.num_pages * self.page_size

    def get_kv_buffer(self, layer_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k_buffers[layer_id], self.v_buffers[layer_id]

    def set_kv_buffer(
        self, layer_id: int, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        """Write `k`, `v` (`[n, num_kv_heads, head_dim]`) into slots `loc` (`[n]`)."""
        flat = (self.num_slots, self.num_kv_heads, self.head_dim)
        self.k_buffers[layer_id].view(flat)[loc.long()] = k.to(self.dtype)
        self.v_buffers[layer_id].view(flat)[loc.long()] = v.to(self.dtype)

    def _zeros(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.zeros(shape, dtype=self.dtype, device=self.device)


@dataclass
class MLATokenToKVPool:
    """Paged MLA cache: compressed KV plus the rope part, one latent head per token.

    Per layer `[num_pages, page_size, 1, kv_lora_rank + qk_rope_head_dim]`.
    """

    num_pages: int
    page_size: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    num_layers: int
    dtype: torch.dtype
    device: torch.device
    kv_buffers: list[torch.Tensor] = field(init=False)

    def __post_init__(self) -> None:
        width = self.kv_lora_rank + self.qk_rope_head_dim
        shape = (self.num_pages, self.page_size, 1, width)
        self.kv_buffers = [
            torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.num_layers)
        ]

    @property
    def num_slots(self) -> int:
        return self.num_pages * self.page_size

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        return self.kv_buffers[layer_id]

    def set_mla_kv_buffer(
        self, layer_id: int, loc: torch.Tensor, k_nope: torch.Tensor, k_rope: torch.Tensor
    ) -> None:
        """Write the compressed part `[n, kv_lora_rank]` and rope part into slots `loc`."""
        width = self.kv_lora_rank + self.qk_rope_head_dim
        flat = self.kv_buffers[layer_id].view(self.num_slots, width)
        flat[loc.long()] = torch.cat([k_nope, k_rope], dim=-1).to(self.dtype)


TokenToKVPool = MHATokenToKVPool | MLATokenToKVPool


@dataclass
class PagedTokenAllocator:
    """Hands out KV pages to requests and records their slots in `req_to_token`.

    Free pages are shuffled with `seed`, so a request's pages are not contiguous and a
    kernel that ignores the page table reads the wrong tokens.
    """

    num_pages: int
    page_size: int
    seed: int = 0
    _free_pages: list[int] = field(init=False)

    def __post_init__(self) -> None:
        pages = list(range(PADDING_PAGE + 1, self.num_pages))
        random.Random(self.seed).shuffle(pages)
        self._free_pages = pages

    def extend(
        self, req_to_token_pool: ReqToTokenPool, *, row: int, old_len: int, new_len: int
    ) -> torch.Tensor:
        """Give request `row` slots for positions `[old_len, new_len)`; return those slots."""
        if new_len > req_to_token_pool.max_context_len:
            raise PoolExhaustedError(
                f"request row {row}: length {new_len} exceeds max_context_len "
                f"{req_to_token_pool.max_context_len}"
            )
        first_new_page = -(-old_len // self.page_size)
        pages_needed = -(-new_len // self.page_size) - first_new_page
        if pages_needed > len(self._free_pages):
            raise PoolExhaustedError(
                f"PagedTokenAllocator: asked for {pages_needed} pages, "
                f"{len(self._free_pages)} free of {self.num_pages}"
            )
        new_pages = self._free_pages[:pages_needed]
        self._free_pages = self._free_pages[pages_needed:]
        row_slots = req_to_token_pool.req_to_token[row]
        for i, page in enumerate(new_pages):
            start = (first_new_page + i) * self.page_size
            offsets = torch.arange(self.page_size, dtype=torch.int32)
            end = min(start + self.page_size, req_to_token_pool.max_context_len)
            row_slots[start:end] = (page * self.page_size + offsets[: end - start]).to(
                row_slots.device
            )
        return row_slots[old_len:new_len].to(torch.int64)


def page_table(
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    *,
    max_pages: int,
    page_size: int,
) -> torch.Tensor:
    """Block table `[bs, max_pages]` int32: page index of each request's page `j`."""
    token_slots = req_to_token[req_pool_indices.long(), : max_pages * page_size : page_size]
    return (token_slots // page_size).to(torch.int32)

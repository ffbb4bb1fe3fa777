"""Tests for fixes.memory_pool: request rows, paged KV writes, shuffled pages, page tables."""

from __future__ import annotations

import re

import pytest
import torch

from fixes.errors import PoolExhaustedError
from fixes.memory_pool import (
    PADDING_PAGE,
    MHATokenToKVPool,
    PagedTokenAllocator,
    ReqToTokenPool,
    page_table,
)

CPU = torch.device("cpu")


def test_req_to_token_rows_are_handed_out_freed_and_exhaustion_is_named() -> None:
    pool = ReqToTokenPool(size=3, max_context_len=8, device=CPU)
    assert pool.alloc(2) == [0, 1]
    with pytest.raises(
        PoolExhaustedError, match=re.escape("ReqToTokenPool: asked for 2 rows, 1 free of 3")
    ):
        pool.alloc(2)
    pool.free([0])
    assert pool.alloc(2) == [2, 0]


def test_allocator_never_hands_out_the_padding_page_and_shuffles_pages() -> None:
    pool = ReqToTokenPool(size=1, max_context_len=32, device=CPU)
    allocator = PagedTokenAllocator(num_pages=9, page_size=4, seed=0)
    slots = allocator.extend(pool, row=0, old_len=0, new_len=32)
    pages = (slots // 4).tolist()[::4]
    assert sorted(pages) == list(range(1, 9)) and PADDING_PAGE not in pages
    assert pages != sorted(pages)
    assert torch.equal(slots, pool.req_to_token[0].to(torch.int64))


def test_extend_fills_the_partial_page_then_takes_new_pages() -> None:
    pool = ReqToTokenPool(size=1, max_context_len=16, device=CPU)
    allocator = PagedTokenAllocator(num_pages=5, page_size=4, seed=1)
    first = allocator.extend(pool, row=0, old_len=0, new_len=3)
    second = allocator.extend(pool, row=0, old_len=3, new_len=6)
    assert int(second[0]) == int(first[0]) + 3  # same page, next offset
    assert int(second[1]) // 4 != int(first[0]) // 4
    with pytest.raises(
        PoolExhaustedError, match=re.escape("request row 0: length 17 exceeds max_context_len 16")
    ):
        allocator.extend(pool, row=0, old_len=6, new_len=17)


def test_set_kv_buffer_writes_the_slots_of_the_paged_layout() -> None:
    kv = MHATokenToKVPool(
        num_pages=3,
        page_size=2,
        num_kv_heads=1,
        head_dim=2,
        num_layers=1,
        dtype=torch.float32,
        device=CPU,
    )
    k = torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]]])
    kv.set_kv_buffer(0, torch.tensor([5, 2]), k, -k)
    k_cache, v_cache = kv.get_kv_buffer(0)
    assert k_cache[2, 1, 0].tolist() == [1.0, 2.0] and k_cache[1, 0, 0].tolist() == [3.0, 4.0]
    assert v_cache[2, 1, 0].tolist() == [-1.0, -2.0]
    assert kv.num_slots == 6


def test_page_table_maps_each_request_page_to_its_pool_page() -> None:
    pool = ReqToTokenPool(size=2, max_context_len=8, device=CPU)
    pool.req_to_token[1] = torch.tensor([12, 13, 14, 15, 4, 5, 6, 7], dtype=torch.int32)
    table = page_table(pool.req_to_token, torch.tensor([1, 0]), max_pages=2, page_size=4)
    assert table.dtype == torch.int32
    assert table.tolist() == [[3, 1], [0, 0]]

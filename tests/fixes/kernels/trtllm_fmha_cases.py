"""Random paged batches and an independent dense attention for the trtllm_fmha tests."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

UNUSED_PAGE = 1_000_000  # block_tables padding: far out of range, so a stray read is caught


@dataclass(frozen=True)
class PagedBatch:
    """Query rows, a paged KV pool and its page table, for several requests."""

    query: torch.Tensor  # [rows, Hq, D]
    k_cache: torch.Tensor  # [pages, page_size, Hkv, D]
    v_cache: torch.Tensor
    block_tables: torch.Tensor  # int32 [bs, max_pages]
    seq_lens: torch.Tensor  # int32 [bs], KV lengths
    cum_seq_lens_q: torch.Tensor  # int32 [bs + 1]
    q_lens: tuple[int, ...]
    softmax_scale: float


def make_batch(
    *,
    q_lens: list[int],
    kv_lens: list[int],
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    page_size: int,
    dtype: torch.dtype,
    seed: int,
    device: str = "cpu",
) -> PagedBatch:
    """Requests with `q_lens[b]` query rows over `kv_lens[b]` KV tokens, pages shuffled."""
    gen = torch.Generator().manual_seed(seed)
    pages_per_req = [max(-(-n // page_size), 0) for n in kv_lens]
    num_pages = sum(pages_per_req) + 3
    order = torch.randperm(num_pages, generator=gen).tolist()
    table = torch.full((len(kv_lens), max(pages_per_req) + 2), UNUSED_PAGE, dtype=torch.int32)
    for b, count in enumerate(pages_per_req):
        table[b, :count] = torch.tensor(order[:count], dtype=torch.int32)
        order = order[count:]

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(dtype)

    pool_shape = (num_pages, page_size, num_kv_heads, head_dim)
    cum = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32)
    return PagedBatch(
        query=rand(sum(q_lens), num_heads, head_dim).to(device),
        k_cache=rand(*pool_shape).to(device),
        v_cache=rand(*pool_shape).to(device),
        block_tables=table.to(device),
        seq_lens=torch.tensor(kv_lens, dtype=torch.int32, device=device),
        cum_seq_lens_q=cum.to(device),
        q_lens=tuple(q_lens),
        softmax_scale=1.0 / math.sqrt(head_dim),
    )


def naive_attention(batch: PagedBatch) -> torch.Tensor:
    """Dense float64 causal attention, token by token: NaN rows where no key is visible."""
    out = torch.full(batch.query.shape, float("nan"), dtype=torch.float64)
    page_size = batch.k_cache.shape[1]
    group = batch.query.shape[1] // batch.k_cache.shape[2]
    for b, q_len in enumerate(batch.q_lens):
        kv_len = int(batch.seq_lens[b])
        slots = [(int(batch.block_tables[b, t // page_size]), t % page_size) for t in range(kv_len)]
        if not slots:
            continue
        keys = torch.stack([batch.k_cache[p, s] for p, s in slots]).double().cpu()
        values = torch.stack([batch.v_cache[p, s] for p, s in slots]).double().cpu()
        for i in range(q_len):
            row = int(batch.cum_seq_lens_q[b]) + i
            visible = kv_len - q_len + i + 1
            if visible <= 0:
                continue
            for h in range(batch.query.shape[1]):
                q = batch.query[row, h].double().cpu()
                scores = keys[:visible, h // group] @ q * batch.softmax_scale
                out[row, h] = torch.softmax(scores, 0) @ values[:visible, h // group]
    return out


def assert_matches(actual: torch.Tensor, expected: torch.Tensor, *, rel: float) -> None:
    """NaN exactly where expected is NaN; elsewhere max abs error <= rel * max |expected|."""
    actual = actual.double().cpu()
    expected_nan = torch.isnan(expected)
    assert torch.equal(torch.isnan(actual), expected_nan), (
        f"NaN rows differ: actual {torch.isnan(actual).any(-1).any(-1).tolist()}, "
        f"expected {expected_nan.any(-1).any(-1).tolist()}"
    )
    finite = ~expected_nan
    error = (actual[finite] - expected[finite]).abs().max().item()
    scale = expected[finite].abs().max().item()
    assert error <= rel * scale, f"relative error {error / scale:.3g} > {rel}"


def rel_tolerance(dtype: torch.dtype) -> float:
    """fp32: 1e-5; 16-bit inputs (probabilities rounded before P @ V): 2e-2."""
    return 1e-5 if dtype == torch.float32 else 2e-2

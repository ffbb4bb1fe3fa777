"""generate_draft_decode_kv_indices: Triton (interpreted on CPU) and torch vs a naive layout."""

from __future__ import annotations

import pytest
import torch

from fixes.errors import KernelContractError
from fixes.kernels.draft_kv_indices import (
    draft_kv_indices_row_len,
    generate_draft_decode_kv_indices,
    storage_tail_view,
)

PROVIDERS = ["torch", "triton"]
UNWRITTEN = -7
NUM_STEPS = 3
POOL_LEN = 200


def make_inputs(seq_lens: list[int], *, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """A req_to_token with distinct slot numbers and requests on scattered rows."""
    generator = torch.Generator().manual_seed(seed)
    req_to_token = torch.randperm(6 * POOL_LEN, generator=generator).view(6, POOL_LEN)
    req_pool_indices = torch.tensor([5, 0, 3, 2][: len(seq_lens)], dtype=torch.int64)
    return req_to_token.to(torch.int32), req_pool_indices, torch.tensor(seq_lens, dtype=torch.int32)


def naive_rows(
    req_to_token: torch.Tensor,
    rows: list[int],
    seq_lens: list[int],
    *,
    topk: int,
    page_size: int,
) -> tuple[list[list[int]], list[list[int]]]:
    """Row `s`: per request and branch, the prefix then `s + 1` draft slots; and the indptr."""
    table = req_to_token.tolist()
    kv_rows, indptr_rows = [], []
    for step in range(NUM_STEPS):
        entries, indptr = [], [0]
        for row, seq_len in zip(rows, seq_lens, strict=True):
            for branch in range(topk):
                if page_size == 1 or topk == 1:
                    first = seq_len + branch * NUM_STEPS
                else:
                    tail = seq_len % page_size
                    pages = (tail + NUM_STEPS + page_size - 1) // page_size
                    first = seq_len - tail + branch * pages * page_size + tail
                entries += table[row][:seq_len] + table[row][first : first + step + 1]
                indptr.append(len(entries))
        kv_rows.append(entries)
        indptr_rows.append(indptr)
    return kv_rows, indptr_rows


def run_kernel(
    seq_lens: list[int], *, topk: int, page_size: int, provider: str, width: int
) -> tuple[torch.Tensor, torch.Tensor, list[list[int]], list[list[int]]]:
    req_to_token, req_pool_indices, lens = make_inputs(seq_lens)
    kv_indices = torch.full((NUM_STEPS, width), UNWRITTEN, dtype=torch.int32)
    kv_indptr = torch.full((NUM_STEPS, len(seq_lens) * topk + 2), UNWRITTEN, dtype=torch.int32)
    generate_draft_decode_kv_indices(
        req_pool_indices=req_pool_indices,
        req_to_token=req_to_token,
        seq_lens=lens,
        kv_indices=kv_indices,
        kv_indptr=kv_indptr,
        topk=topk,
        page_size=page_size,
        provider=provider,
    )
    expected = naive_rows(
        req_to_token, req_pool_indices.tolist(), seq_lens, topk=topk, page_size=page_size
    )
    return kv_indices, kv_indptr, *expected


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("topk", [1, 2, 4])
@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize("seq_lens", [[5], [7, 12, 1], [150, 3]])
def test_each_row_holds_prefixes_then_step_plus_one_drafts_per_branch(
    provider: str, topk: int, page_size: int, seq_lens: list[int]
) -> None:
    kv_indices, kv_indptr, rows, indptrs = run_kernel(
        seq_lens,
        topk=topk,
        page_size=page_size,
        provider=provider,
        width=len(seq_lens) * topk * POOL_LEN,
    )
    for step in range(NUM_STEPS):
        needed = len(rows[step])
        assert kv_indices[step, :needed].tolist() == rows[step]
        assert (kv_indices[step, needed:] == UNWRITTEN).all(), "wrote past the needed length"
        assert kv_indptr[step, : len(indptrs[step])].tolist() == indptrs[step]
        assert kv_indptr[step, len(indptrs[step]) :].tolist() == [UNWRITTEN]


@pytest.mark.parametrize("topk", [1, 2, 4])
def test_row_len_counts_topk_prefix_copies_and_step_plus_one_drafts(topk: int) -> None:
    seq_lens = [9, 4]
    _, _, rows, _ = run_kernel(seq_lens, topk=topk, page_size=1, provider="torch", width=1000)
    for step in range(NUM_STEPS):
        assert len(rows[step]) == draft_kv_indices_row_len(
            seq_lens_sum=sum(seq_lens), topk=topk, num_seqs=len(seq_lens), step=step
        )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_last_row_overflow_spills_past_the_buffer_into_the_rest_of_the_allocation(
    provider: str,
) -> None:
    seq_lens, topk = [6, 5], 2  # rows need 26, 30, 34 entries
    req_to_token, req_pool_indices, lens = make_inputs(seq_lens)
    allocation = torch.full((3 * 32 + 8,), UNWRITTEN, dtype=torch.int32)
    kv_indices = allocation[: 3 * 32].view(3, 32)
    kv_indptr = torch.zeros((3, 5), dtype=torch.int32)
    generate_draft_decode_kv_indices(
        req_pool_indices=req_pool_indices,
        req_to_token=req_to_token,
        seq_lens=lens,
        kv_indices=kv_indices,
        kv_indptr=kv_indptr,
        topk=topk,
        provider=provider,
    )
    rows, _ = naive_rows(req_to_token, req_pool_indices.tolist(), seq_lens, topk=topk, page_size=1)
    assert allocation[64:98].tolist() == rows[2]
    assert allocation[98:].tolist() == [UNWRITTEN] * 6


def test_torch_provider_overflowing_into_the_next_row_leaves_that_row_written_last() -> None:
    seq_lens, topk = [7, 6], 2  # rows need 30, 34, 38 entries; rows are 32 wide
    req_to_token, req_pool_indices, lens = make_inputs(seq_lens)
    allocation = torch.full((3 * 32 + 16,), UNWRITTEN, dtype=torch.int32)
    generate_draft_decode_kv_indices(
        req_pool_indices=req_pool_indices,
        req_to_token=req_to_token,
        seq_lens=lens,
        kv_indices=allocation[:96].view(3, 32),
        kv_indptr=torch.zeros((3, 5), dtype=torch.int32),
        topk=topk,
        provider="torch",
    )
    rows, _ = naive_rows(req_to_token, req_pool_indices.tolist(), seq_lens, topk=topk, page_size=1)
    assert allocation[32:64].tolist() == rows[1][:32]  # row 1's spill was overwritten by row 2
    assert allocation[64:102].tolist() == rows[2]


def test_torch_provider_raises_where_the_kernel_would_leave_the_allocation() -> None:
    seq_lens, topk = [7, 6], 2
    req_to_token, req_pool_indices, lens = make_inputs(seq_lens)
    with pytest.raises(IndexError) as info:
        generate_draft_decode_kv_indices(
            req_pool_indices=req_pool_indices,
            req_to_token=req_to_token,
            seq_lens=lens,
            kv_indices=torch.zeros((3, 32), dtype=torch.int32),
            kv_indptr=torch.zeros((3, 5), dtype=torch.int32),
            topk=topk,
            provider="torch",
        )
    assert str(info.value) == (
        "generate_draft_decode_kv_indices: step 2 writes kv_indices entries up to flat offset "
        "102, but the allocation holds 96 entries (row width 32); the real kernel would write "
        "unowned memory"
    )


def test_unknown_provider_is_refused_with_the_choices() -> None:
    req_to_token, req_pool_indices, lens = make_inputs([3])
    with pytest.raises(KernelContractError) as info:
        generate_draft_decode_kv_indices(
            req_pool_indices=req_pool_indices,
            req_to_token=req_to_token,
            seq_lens=lens,
            kv_indices=torch.zeros((3, 8), dtype=torch.int32),
            kv_indptr=torch.zeros((3, 2), dtype=torch.int32),
            topk=1,
            provider="cuda",
        )
    assert str(info.value) == (
        "generate_draft_decode_kv_indices: provider 'cuda' is unknown: expected one of "
        "triton, torch"
    )


def test_storage_tail_view_reaches_the_end_of_the_allocation() -> None:
    allocation = torch.arange(20, dtype=torch.int32)
    buffer = allocation[4:12].view(2, 4)
    assert storage_tail_view(buffer, start=4).tolist() == list(range(8, 20))


@pytest.mark.gpu
@pytest.mark.parametrize("topk", [1, 2, 4])
def test_triton_on_gpu_matches_the_naive_layout(topk: int) -> None:
    seq_lens = [150, 7, 12]
    req_to_token, req_pool_indices, lens = make_inputs(seq_lens)
    kv_indices = torch.full(
        (NUM_STEPS, 3 * topk * POOL_LEN), UNWRITTEN, dtype=torch.int32, device="cuda"
    )
    kv_indptr = torch.zeros((NUM_STEPS, 3 * topk + 1), dtype=torch.int32, device="cuda")
    generate_draft_decode_kv_indices(
        req_pool_indices=req_pool_indices.cuda(),
        req_to_token=req_to_token.cuda(),
        seq_lens=lens.cuda(),
        kv_indices=kv_indices,
        kv_indptr=kv_indptr,
        topk=topk,
        provider="triton",
    )
    rows, indptrs = naive_rows(
        req_to_token, req_pool_indices.tolist(), seq_lens, topk=topk, page_size=1
    )
    for step in range(NUM_STEPS):
        assert kv_indices[step, : len(rows[step])].tolist() == rows[step]
        assert kv_indptr[step].tolist() == indptrs[step]

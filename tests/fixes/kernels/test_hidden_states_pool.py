"""assign_hidden_states_pool: Triton (interpreted on CPU) and torch against a naive copy."""

from __future__ import annotations

import pytest
import torch

from fixes.errors import KernelContractError
from fixes.kernels.hidden_states_pool import assign_hidden_states_pool
from prtoggle.detect.redzones import buffers
from prtoggle.errors import RedzoneRead

PROVIDERS = ["torch", "triton"]


def assign(
    hidden: torch.Tensor,
    rows: torch.Tensor,
    pool: torch.Tensor,
    *,
    pool_size: int,
    num_seqs: int,
    lens: torch.Tensor,
    starts: torch.Tensor,
    provider: str,
) -> None:
    assign_hidden_states_pool(
        hidden_states=hidden,
        req_pool_indices=rows,
        req_to_hidden_states_pool=pool,
        pool_size=pool_size,
        num_seqs=num_seqs,
        extend_seq_lens=lens,
        extend_start_loc=starts,
        provider=provider,
    )


def naive_pool(
    hidden: torch.Tensor,
    rows: list[int],
    pool: torch.Tensor,
    *,
    pool_size: int,
    lens: list[int],
    starts: list[int],
) -> torch.Tensor:
    expected = pool.clone()
    for row, length, start in zip(rows, lens, starts, strict=True):
        for i in range(pool_size):
            expected[row, i] = hidden[start + length - pool_size + i]
    return expected


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("pool_size", [1, 2, 3])
@pytest.mark.parametrize("hidden_size", [8, 20])
@pytest.mark.parametrize("lens", [[4], [3, 5, 4], [6, 3, 3, 7]])
def test_each_request_row_gets_the_last_pool_size_states_of_its_window(
    provider: str, pool_size: int, hidden_size: int, lens: list[int]
) -> None:
    generator = torch.Generator().manual_seed(pool_size * 100 + hidden_size)
    starts = torch.tensor([0, *lens[:-1]]).cumsum(0).tolist()
    hidden = torch.randn(sum(lens), hidden_size, generator=generator)
    rows = [6, 1, 3, 0][: len(lens)]
    pool = torch.randn(8, pool_size + 1, hidden_size, generator=generator)
    expected = naive_pool(hidden, rows, pool, pool_size=pool_size, lens=lens, starts=starts)
    assign(
        hidden,
        torch.tensor(rows),
        pool,
        pool_size=pool_size,
        num_seqs=len(lens),
        lens=torch.tensor(lens, dtype=torch.int32),
        starts=torch.tensor(starts, dtype=torch.int32),
        provider=provider,
    )
    assert torch.equal(pool, expected)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_num_seqs_larger_than_the_index_tensors_reads_on_into_their_allocation(
    provider: str,
) -> None:
    hidden = torch.arange(24, dtype=torch.float32).view(12, 2)
    rows_allocation = torch.tensor([4, 1, 2])
    lens_allocation = torch.tensor([4, 4, 4], dtype=torch.int32)
    starts_allocation = torch.tensor([0, 4, 8], dtype=torch.int32)
    pool = torch.zeros(5, 1, 2)
    assign(
        hidden,
        rows_allocation[:2],
        pool,
        pool_size=1,
        num_seqs=3,
        lens=lens_allocation[:2],
        starts=starts_allocation[:2],
        provider=provider,
    )
    assert pool[2, 0].tolist() == [22.0, 23.0]  # the third request came from past the views


def assign_four_requests(req_pool_indices: torch.Tensor) -> None:
    """Four requests' pool rows read from `req_pool_indices` (torch provider)."""
    assign(
        torch.zeros(8, 2),
        req_pool_indices,
        torch.zeros(4, 1, 2),
        pool_size=1,
        num_seqs=4,
        lens=torch.tensor([2, 2, 2, 2]),
        starts=torch.tensor([0, 2, 4, 6]),
        provider="torch",
    )


def test_torch_provider_raises_where_the_kernel_would_read_past_the_allocation() -> None:
    with pytest.raises(IndexError) as info:
        assign_four_requests(torch.tensor([0, 1]))
    assert str(info.value) == (
        "assign_hidden_states_pool: reads 4 entries of req_pool_indices, whose allocation "
        "holds 2 (tensor length 2); the real kernel would read unowned memory"
    )


def test_torch_provider_raises_on_a_pool_row_outside_the_pool() -> None:
    with pytest.raises(IndexError) as info:
        assign(
            torch.zeros(4, 2),
            torch.tensor([0, -1]),
            torch.zeros(4, 1, 2),
            pool_size=1,
            num_seqs=2,
            lens=torch.tensor([2, 2]),
            starts=torch.tensor([0, 2]),
            provider="torch",
        )
    assert str(info.value) == (
        "assign_hidden_states_pool: pool row -1 outside [0, 4) (req_pool_indices); the real "
        "kernel would write unowned memory"
    )


def test_torch_provider_raises_on_hidden_rows_outside_the_hidden_states() -> None:
    with pytest.raises(IndexError) as info:
        assign(
            torch.zeros(4, 2),
            torch.tensor([0]),
            torch.zeros(4, 2, 2),
            pool_size=2,
            num_seqs=1,
            lens=torch.tensor([4]),
            starts=torch.tensor([2]),
            provider="torch",
        )
    assert str(info.value) == (
        "assign_hidden_states_pool: hidden-state rows [4, 6) outside [0, 4) "
        "(extend_start_loc 2, extend_seq_lens 4); the real kernel would read unowned memory"
    )


def test_unknown_provider_is_refused_with_the_choices() -> None:
    with pytest.raises(KernelContractError) as info:
        assign(
            torch.zeros(2, 2),
            torch.tensor([0]),
            torch.zeros(1, 1, 2),
            pool_size=1,
            num_seqs=1,
            lens=torch.tensor([2]),
            starts=torch.tensor([0]),
            provider="cuda",
        )
    assert str(info.value) == (
        "assign_hidden_states_pool: provider 'cuda' is unknown: expected one of triton, torch"
    )


@pytest.mark.gpu
def test_triton_on_gpu_matches_the_naive_copy() -> None:
    lens, starts = [6, 3, 7], [0, 6, 9]
    hidden = torch.randn(16, 40)
    pool = torch.zeros(8, 2, 40)
    expected = naive_pool(hidden, [6, 1, 3], pool, pool_size=2, lens=lens, starts=starts)
    on_gpu = pool.cuda()
    assign(
        hidden.cuda(),
        torch.tensor([6, 1, 3], device="cuda"),
        on_gpu,
        pool_size=2,
        num_seqs=3,
        lens=torch.tensor(lens, dtype=torch.int32, device="cuda"),
        starts=torch.tensor(starts, dtype=torch.int32, device="cuda"),
        provider="triton",
    )
    assert torch.equal(on_gpu.cpu(), expected)


def test_torch_provider_names_a_read_of_a_guarded_index_buffers_redzone() -> None:
    # A stale 2-entry graph buffer read for 4 requests, guarded as under --auto-detect.
    indices = buffers.guarded_buffer(
        (2,), dtype=torch.int64, device="cpu", name="graph.rows", fill=0
    )
    with pytest.raises(RedzoneRead) as info:
        assign_four_requests(indices)
    assert str(info.value) == (
        "1 site hit: redzone of buffer graph.rows: 16 bytes read by "
        "assign_hidden_states_pool: req_pool_indices[:4], first at byte 0 past its end "
        "(16-byte buffer on cpu)"
    )

"""MLA paged decode: the vectorised torch reference against a per-row loop; flashinfer on GPU."""

from __future__ import annotations

import pytest
import torch

from fixes.errors import KernelContractError
from fixes.kernels.draft_kv_indices import storage_tail_view
from fixes.kernels.mla_attention import (
    FlashInferMLADecode,
    MLAShape,
    check_provider,
    flashinfer_workspace,
    mla_paged_decode_torch,
)


def make_case(
    kv_lens: list[int],
    *,
    shape: MLAShape,
    num_slots: int = 64,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    width = shape.kv_lora_rank + shape.qk_rope_head_dim
    slots = torch.randperm(num_slots, generator=generator)[: sum(kv_lens)].to(torch.int32)
    indptr = torch.tensor([0, *kv_lens]).cumsum(0).to(torch.int32)
    bs = len(kv_lens)
    case = {
        "q_nope": torch.randn(bs, shape.num_heads, shape.kv_lora_rank, generator=generator),
        "q_pe": torch.randn(bs, shape.num_heads, shape.qk_rope_head_dim, generator=generator),
        "kv_cache": torch.randn(num_slots, 1, 1, width, generator=generator),
        "kv_indptr": indptr,
        "kv_indices": slots,
    }
    return {
        name: value.to(device, dtype) if value.is_floating_point() else value.to(device)
        for name, value in case.items()
    }


def naive_decode(case: dict[str, torch.Tensor], shape: MLAShape) -> torch.Tensor:
    cache = case["kv_cache"].float().reshape(case["kv_cache"].shape[0], -1)
    indptr = case["kv_indptr"].tolist()
    out = torch.zeros(case["q_nope"].shape, dtype=torch.float32)
    for b in range(len(indptr) - 1):
        keys = cache[case["kv_indices"][indptr[b] : indptr[b + 1]].long()].cpu()
        if keys.shape[0] == 0:
            continue
        nope, rope = keys[:, : shape.kv_lora_rank], keys[:, shape.kv_lora_rank :]
        for h in range(shape.num_heads):
            scores = nope @ case["q_nope"][b, h].float().cpu()
            scores += rope @ case["q_pe"][b, h].float().cpu()
            out[b, h] = torch.softmax(scores * shape.sm_scale, dim=0) @ nope
    return out


SHAPE = MLAShape(num_heads=3, kv_lora_rank=16, qk_rope_head_dim=8, sm_scale=0.2)


@pytest.mark.parametrize("kv_lens", [[1], [5, 9, 2], [17, 1, 30, 4]])
def test_torch_reference_matches_a_per_row_loop(kv_lens: list[int]) -> None:
    case = make_case(kv_lens, shape=SHAPE)
    out = mla_paged_decode_torch(**case, shape=SHAPE, max_kv_len=32)
    torch.testing.assert_close(out, naive_decode(case, SHAPE), atol=1e-5, rtol=1e-5)


def test_an_empty_kv_range_gives_zeros_as_flashinfer_does() -> None:
    case = make_case([3, 0, 2], shape=SHAPE)
    out = mla_paged_decode_torch(**case, shape=SHAPE, max_kv_len=8)
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    assert bool(out[0].abs().sum() > 0)


def test_a_range_longer_than_its_row_reads_on_into_the_next_row_as_through_a_pointer() -> None:
    case = make_case([6], shape=SHAPE)
    rows = torch.full((2, 4), -1, dtype=torch.int32)
    rows.view(-1)[:6] = case["kv_indices"]
    through_pointer = {**case, "kv_indices": storage_tail_view(rows, start=0)}
    out = mla_paged_decode_torch(**through_pointer, shape=SHAPE, max_kv_len=8)
    torch.testing.assert_close(out, naive_decode(case, SHAPE), atol=1e-5, rtol=1e-5)


def test_cpu_index_past_kv_indices_raises_instead_of_reading_unowned_memory() -> None:
    case = make_case([4, 4], shape=SHAPE)
    case["kv_indptr"] = torch.tensor([0, 4, 10], dtype=torch.int32)
    with pytest.raises(IndexError) as info:
        mla_paged_decode_torch(**case, shape=SHAPE, max_kv_len=8)
    assert str(info.value) == (
        "MLA decode: kv_indices position 8 at (row, offset) (1, 4) outside [0, 8); the real "
        "kernel would read unowned memory"
    )


def test_cpu_slot_outside_the_cache_raises() -> None:
    case = make_case([2], shape=SHAPE, num_slots=8)
    case["kv_indices"] = torch.tensor([3, 8], dtype=torch.int32)
    with pytest.raises(IndexError) as info:
        mla_paged_decode_torch(**case, shape=SHAPE, max_kv_len=4)
    assert str(info.value) == (
        "MLA decode: KV slot 8 at (row, offset) (0, 1) outside [0, 8); the real kernel would "
        "read unowned memory"
    )


def test_unknown_provider_is_refused_with_the_choices() -> None:
    with pytest.raises(KernelContractError) as info:
        check_provider("triton")
    assert str(info.value) == (
        "MLA decode provider 'triton' is unknown: expected one of torch, flashinfer"
    )


@pytest.mark.gpu
@pytest.mark.parametrize("kv_lens", [[1], [5, 9, 2], [17, 1, 30, 4]])
def test_flashinfer_matches_the_torch_reference_on_gpu(kv_lens: list[int]) -> None:
    shape = MLAShape(num_heads=16, kv_lora_rank=512, qk_rope_head_dim=64, sm_scale=576**-0.5)
    case = make_case(kv_lens, shape=shape, dtype=torch.bfloat16, device="cuda")
    bs = len(kv_lens)
    decode = FlashInferMLADecode(
        shape=shape,
        kv_indptr=case["kv_indptr"].clone(),
        kv_indices=case["kv_indices"],
        bs=bs,
        workspace=flashinfer_workspace(torch.device("cuda")),
    )
    decode.plan(kv_indptr_cpu=case["kv_indptr"].cpu(), dtype=torch.bfloat16)
    out = decode.run(q_nope=case["q_nope"], q_pe=case["q_pe"], kv_cache=case["kv_cache"])
    expected = mla_paged_decode_torch(**case, shape=shape, max_kv_len=32)
    torch.testing.assert_close(out.float(), expected.float(), atol=2e-2, rtol=2e-2)

"""The arguments every TRT-LLM FMHA provider receives."""

from __future__ import annotations

import dataclasses

import torch

from fixes.kernels.trtllm_fmha_contract import (
    ContextArgs,
    DecodeArgs,
    PagedAttentionArgs,
    default_provider,
)


def _paged() -> PagedAttentionArgs:
    def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype)

    return PagedAttentionArgs(
        query=zeros(3, 2, 16),
        k_cache=zeros(4, 2, 1, 16),
        v_cache=zeros(4, 2, 1, 16),
        block_tables=zeros(3, 2, dtype=torch.int32),
        seq_lens=zeros(3, dtype=torch.int32),
        softmax_scale=0.25,
        out=zeros(3, 2, 16),
    )


def test_decode_and_context_args_carry_the_same_tensors_and_their_own_host_values() -> None:
    paged = _paged()
    decode = paged.for_decode(q_len_per_req=2, max_seq_len=8)
    context = paged.for_context(
        batch_size=3, cum_seq_lens_q=torch.arange(4, dtype=torch.int32), max_q_len=1, max_kv_len=8
    )
    for args in (decode, context):
        for field in dataclasses.fields(PagedAttentionArgs):
            assert getattr(args, field.name) is getattr(paged, field.name)
    assert (type(decode), decode.q_len_per_req, decode.max_seq_len) == (DecodeArgs, 2, 8)
    assert (type(context), context.batch_size, context.max_q_len) == (ContextArgs, 3, 1)


def test_the_default_provider_is_torch_on_cpu_and_triton_on_cuda() -> None:
    assert default_provider("cpu") == "torch"
    assert default_provider(torch.device("cuda", 1)) == "triton"

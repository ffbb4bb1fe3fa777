"""Stand-ins for calling real sglang functions on CPU or a GPU (batches, backends, devices)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

from prtoggle.detect.redzones.allocations import torch_function_mode

WIDTH_SCRIPT = """
import types, torch
from torch.overrides import TorchFunctionMode
from sglang.srt.layers.attention.flashinfer_mla_backend import FlashInferMLAMultiStepDraftBackend

class OnCpu(TorchFunctionMode):
    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if kwargs.get("device") == "cuda":
            kwargs["device"] = "cpu"
        return func(*args, **kwargs)

class Step:
    def init_cuda_graph_state(self, max_bs, max_num_tokens, kv_indices_buf=None):
        self.row = kv_indices_buf

backend = types.SimpleNamespace(
    speculative_num_steps=3, topk=4, max_context_len=64, attn_backends=[Step(), Step()]
)
with OnCpu():
    FlashInferMLAMultiStepDraftBackend.init_cuda_graph_state(backend, 8, 8 * 4)
print(tuple(backend.cuda_graph_kv_indices.shape))
"""
"""Run the real init_cuda_graph_state (max_bs 8, topk 4, context 64) and print its shape."""


def cuda_devices_on_cpu() -> Any:
    """A TorchFunctionMode turning `device="cuda"` of torch calls into the CPU (sglang
    hard-codes cuda)."""
    return torch_function_mode(_on_cpu)


def prefill_batch() -> types.SimpleNamespace:
    """A ScheduleBatch stand-in: request b is a chunked request whose next prompt token is 99."""
    first, chunked = object(), object()
    return types.SimpleNamespace(
        input_ids=torch.zeros(2, dtype=torch.int64),
        chunked_req_next_prompt_token=99,
        reqs=[first, chunked],
        chunked_req=chunked,
    )


TAIL_SCRIPT = """
import torch, types
import prtoggle
from sglang.srt.speculative.eagle_utils import _eagle_prefill_tail_tokens
first, chunked = object(), object()
batch = types.SimpleNamespace(input_ids=torch.zeros(2, dtype=torch.int64),
    chunked_req_next_prompt_token=99, reqs=[first, chunked], chunked_req=chunked)
print(_eagle_prefill_tail_tokens(batch, torch.tensor([5, 6])).tolist(),
      prtoggle.is_reverted(26329))
"""
"""Import and call the real _eagle_prefill_tail_tokens; print its result and is_reverted."""


class DraftStepBackend:
    """Stand-in for one per-step FlashInferMLAAttnBackend of the multi-step draft backend.

    Where the real one plans its paged MLA read over `spec_info.kv_indptr` and
    `spec_info.kv_indices`, this probes that the indptr the draft kv-indices kernel wrote
    stays inside the kv_indices slice the step is handed (prtoggle's range probe).
    """

    def __init__(self, step: int) -> None:
        self.step = step

    def init_cuda_graph_state(
        self, max_bs: int, max_num_tokens: int, kv_indices_buf: torch.Tensor | None = None
    ) -> None:
        self.kv_indices_buf = kv_indices_buf

    def init_forward_metadata_out_graph(self, forward_batch: Any, in_capture: bool = False) -> None:
        from prtoggle import detect

        spec_info = forward_batch.spec_info
        detect.maybe_detect_oob(
            spec_info.kv_indptr,
            0,
            spec_info.kv_indices.numel() + 1,
            f"flashinfer_mla.draft_kv_indices[step={self.step}].row_width",
        )


def mla_draft_backend(
    *, max_bs: int, topk: int, num_steps: int, max_context_len: int, device: str = "cpu"
) -> Any:
    """A real FlashInferMLAMultiStepDraftBackend built without its model runner (its
    __init__ needs one): the attributes its methods read, on `device`, a static
    (non-translating) KV pool read through the real KVIndexTranslator, page size 1."""
    from sglang.srt.layers.attention.flashinfer_mla_backend import (
        FlashInferMLAMultiStepDraftBackend,
    )
    from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator
    from sglang.srt.speculative.spec_utils import generate_draft_decode_kv_indices

    pool_rows, pool_width = 4, 16
    req_to_token = torch.arange(
        1000, 1000 + pool_rows * pool_width, dtype=torch.int32, device=device
    )
    backend = FlashInferMLAMultiStepDraftBackend.__new__(FlashInferMLAMultiStepDraftBackend)
    backend.__dict__.update(
        topk=topk,
        speculative_num_steps=num_steps,
        max_context_len=max_context_len,
        generate_draft_decode_kv_indices=generate_draft_decode_kv_indices,
        attn_backends=[DraftStepBackend(step) for step in range(num_steps - 1)],
        kv_indptr=torch.zeros((num_steps, max_bs * topk + 1), dtype=torch.int32, device=device),
        page_size=1,
        kv_index_translator=KVIndexTranslator(
            req_to_token=req_to_token.reshape(pool_rows, pool_width),
            token_to_kv_pool_allocator=object(),
            token_to_kv_pool=object(),
            page_size=1,
            device=device,
        ),
    )
    return backend


def draft_decode_batch(
    seq_lens: list[int], *, topk: int, device: str = "cpu"
) -> types.SimpleNamespace:
    """The forward batch the EAGLE draft CUDA graph runner hands the draft backend at replay
    (a SimpleNamespace there too): requests in req_to_token rows 1.., one position per
    branch (the request's length)."""
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    lengths = torch.tensor(seq_lens, dtype=torch.int64, device=device)
    return types.SimpleNamespace(
        batch_size=len(seq_lens),
        forward_mode=ForwardMode.DECODE,
        seq_lens=lengths,
        seq_lens_cpu=lengths.to("cpu", copy=True),
        seq_lens_sum=sum(seq_lens),
        req_pool_indices=torch.arange(1, len(seq_lens) + 1, device=device),
        positions=lengths.repeat_interleave(topk),
        kv_loc_plan=None,
        spec_info=types.SimpleNamespace(is_draft_input=lambda: True),
        num_padding=0,
    )


def _on_cpu(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if kwargs.get("device") == "cuda":
        kwargs["device"] = "cpu"
    return func(*args, **kwargs)

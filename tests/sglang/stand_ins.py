"""Stand-in objects for calling real sglang functions on CPU (batches, backends, devices)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

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


class CudaDevicesOnCpu(TorchFunctionMode):
    """Turns `device="cuda"` of torch factory calls into the CPU (sglang hard-codes cuda)."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types_: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if kwargs.get("device") == "cuda":
            kwargs["device"] = "cpu"
        return func(*args, **kwargs)


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

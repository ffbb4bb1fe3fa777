"""The attention backend interface: eager metadata, CUDA graph capture/replay hooks, forwards.

Shaped like sglang's (and mini-sglang's) attention backends. A model calls `forward`
once per layer; the runner calls the `init_*` hooks once per forward pass:

- eager: `init_forward_metadata(forward_batch)`, then the layers' forwards;
- CUDA graphs: `init_cuda_graph_state(max_bs=...)` once, then per captured batch size
  `init_forward_metadata_capture_cuda_graph(...)` before the warm-up runs and the
  capture, and `init_forward_metadata_replay_cuda_graph(...)` before every replay.

A multi-step draft backend (`MultiStepDraftBackend`) holds one backend per draft step and
runs each hook on every step's backend; the draft decode graph runner drives it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fixes.forward_batch import DraftDecodeInput, ForwardBatch, ForwardMode, SpecInput

__all__ = ["AttentionBackend", "AttentionLayer", "MultiStepDraftBackend"]


@dataclass(frozen=True)
class AttentionLayer:
    """Shape of one attention layer as the backend sees it."""

    layer_id: int
    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    scaling: float


class AttentionBackend(ABC):
    """Paged attention for one forward pass at a time; metadata is built before the layers run."""

    @abstractmethod
    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        """Build the metadata of an eager forward from the batch."""

    @abstractmethod
    def init_cuda_graph_state(self, *, max_bs: int) -> None:
        """Pre-allocate the metadata buffers graphs of up to `max_bs` requests will read."""

    @abstractmethod
    def init_forward_metadata_capture_cuda_graph(
        self,
        *,
        bs: int,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        forward_mode: ForwardMode,
        spec_info: SpecInput | None,
    ) -> None:
        """Bind the metadata of batch size `bs` to the graph buffers and fill them."""

    @abstractmethod
    def init_forward_metadata_replay_cuda_graph(
        self,
        *,
        bs: int,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        seq_lens_cpu: torch.Tensor,
        forward_mode: ForwardMode,
        spec_info: SpecInput | None,
    ) -> None:
        """Copy the live batch's metadata into the buffers the graph of size `bs` reads."""

    @abstractmethod
    def forward_decode(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer: AttentionLayer,
        forward_batch: ForwardBatch,
        *,
        save_kv_cache: bool = True,
    ) -> torch.Tensor:
        """Attention of DECODE/IDLE batches (one query row per request)."""

    @abstractmethod
    def forward_extend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer: AttentionLayer,
        forward_batch: ForwardBatch,
        *,
        save_kv_cache: bool = True,
    ) -> torch.Tensor:
        """Attention of the extend-shaped modes (EXTEND, TARGET_VERIFY, DRAFT_EXTEND_V2)."""

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer: AttentionLayer,
        forward_batch: ForwardBatch,
        *,
        save_kv_cache: bool = True,
    ) -> torch.Tensor:
        """Route to `forward_decode` or `forward_extend` by the batch's forward mode."""
        if forward_batch.forward_mode.is_decode_or_idle():
            return self.forward_decode(q, k, v, layer, forward_batch, save_kv_cache=save_kv_cache)
        return self.forward_extend(q, k, v, layer, forward_batch, save_kv_cache=save_kv_cache)


class MultiStepDraftBackend:
    """One backend per draft step (step i: `speculative_step_id = i`); each hook runs on every
    step's backend in step order, graph capture and replay as draft decode."""

    def __init__(self, backends: Sequence[AttentionBackend], *, topk: int) -> None:
        self.backends = list(backends)
        self.num_steps = len(self.backends)
        self.topk = topk

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        for backend in self.backends:
            backend.init_forward_metadata(forward_batch)

    def init_cuda_graph_state(self, *, max_bs: int) -> None:
        for backend in self.backends:
            backend.init_cuda_graph_state(max_bs=max_bs)

    def init_forward_metadata_capture_cuda_graph(
        self, *, bs: int, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor
    ) -> None:
        """Capture-time metadata of every step for batch size `bs` (draft decode)."""
        spec_info = DraftDecodeInput(topk=self.topk, num_steps=self.num_steps)
        for backend in self.backends:
            backend.init_forward_metadata_capture_cuda_graph(
                bs=bs,
                req_pool_indices=req_pool_indices,
                seq_lens=seq_lens,
                forward_mode=ForwardMode.DECODE,
                spec_info=spec_info,
            )

    def init_forward_metadata_replay_cuda_graph(
        self,
        *,
        bs: int,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        seq_lens_cpu: torch.Tensor,
    ) -> None:
        """Replay-time metadata of every step for the graph of batch size `bs` (draft decode)."""
        spec_info = DraftDecodeInput(topk=self.topk, num_steps=self.num_steps)
        for backend in self.backends:
            backend.init_forward_metadata_replay_cuda_graph(
                bs=bs,
                req_pool_indices=req_pool_indices,
                seq_lens=seq_lens,
                seq_lens_cpu=seq_lens_cpu,
                forward_mode=ForwardMode.DECODE,
                spec_info=spec_info,
            )

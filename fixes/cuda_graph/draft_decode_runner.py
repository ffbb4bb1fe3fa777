"""CUDA graphs of the multi-step draft decode (all steps in one graph per batch size)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from fixes.attention.base import AttentionBackend, MultiStepDraftBackend
from fixes.cuda_graph.graph import CapturedGraph, capture, graph_memory_pool
from fixes.errors import CudaGraphError
from fixes.forward_batch import DraftDecodeInput, ForwardBatch, ForwardMode
from fixes.memory_pool import PADDING_PAGE, MHATokenToKVPool, ReqToTokenPool
from prtoggle import detect

__all__ = [
    "SEQ_LEN_FILL_VALUE",
    "DraftDecodeGraphRunner",
    "DraftDecodeModel",
]

logger = logging.getLogger(__name__)

SEQ_LEN_FILL_VALUE = 1
"""Capture-time (and padded-row) sequence length, as sglang's runners use."""


class DraftDecodeModel(Protocol):
    """What the runner needs from the draft model: one forward of a batch through a backend."""

    def forward(self, forward_batch: ForwardBatch, backend: AttentionBackend) -> torch.Tensor: ...


@dataclass
class _StaticInputs:
    """Graph inputs sized for the largest captured batch; graphs read slices of them."""

    input_ids: torch.Tensor  # [num_steps, max_bs] int64, device: draft token of each step
    out_cache_loc: torch.Tensor  # [num_steps, max_bs] int64, device: KV slot of each step
    positions: torch.Tensor  # [num_steps, max_bs] int64, device
    req_pool_indices: torch.Tensor  # [max_bs] int64, device
    seq_lens: torch.Tensor  # [max_bs] int32, device: prefix lengths (fill value when idle)


class DraftDecodeGraphRunner:
    """Captures the draft model's `num_steps` decode steps for each batch size, replays them."""

    def __init__(
        self,
        *,
        model: DraftDecodeModel,
        draft_backend: MultiStepDraftBackend,
        req_to_token_pool: ReqToTokenPool,
        token_to_kv_pool: MHATokenToKVPool,
        capture_batch_sizes: Sequence[int],
    ) -> None:
        if not capture_batch_sizes or min(capture_batch_sizes) < 1:
            raise CudaGraphError(
                f"capture_batch_sizes={list(capture_batch_sizes)}: expected a non-empty list "
                "of batch sizes >= 1"
            )
        self.model = model
        self.draft_backend = draft_backend
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool = token_to_kv_pool
        self.capture_batch_sizes = sorted(set(capture_batch_sizes))
        self.num_steps = draft_backend.num_steps
        self.device = token_to_kv_pool.device
        self.graphs: dict[int, CapturedGraph[torch.Tensor]] = {}
        self._static = self._allocate_static(max(self.capture_batch_sizes))

    @property
    def max_bs(self) -> int:
        return self.capture_batch_sizes[-1]

    def can_run(self, bs: int) -> bool:
        return 1 <= bs <= self.max_bs

    def capture(self) -> None:
        """Capture every batch size, largest first; `detect.check()` after each capture."""
        self.draft_backend.init_cuda_graph_state(max_bs=self.max_bs)
        pool = graph_memory_pool(self.device)
        for bs in reversed(self.capture_batch_sizes):
            self.draft_backend.init_forward_metadata_capture_cuda_graph(
                bs=bs,
                req_pool_indices=self._static.req_pool_indices[:bs],
                seq_lens=self._static.seq_lens[:bs],
            )
            self.graphs[bs] = capture(self._forward_fn(bs), device=self.device, pool=pool)
            detect.check()
            logger.debug("captured draft decode graph for bs=%d", bs)

    def replay(self, step_batches: Sequence[ForwardBatch]) -> torch.Tensor:
        """Run the draft steps of `step_batches` (one per step) through the smallest graph.

        Returns `[num_steps, bs, hidden]` for the real requests (a copy).
        """
        if len(step_batches) != self.num_steps:
            raise CudaGraphError(
                f"replay got {len(step_batches)} step batches; expected num_steps={self.num_steps}"
            )
        real_bs = int(step_batches[0].seq_lens.shape[0])
        graph_bs = next((b for b in self.capture_batch_sizes if b >= real_bs), None)
        if graph_bs is None or not self.graphs:
            raise CudaGraphError(
                f"no captured draft decode graph fits bs={real_bs}; captured batch sizes: "
                f"{sorted(self.graphs)} (call capture() first; check can_run(bs))"
            )
        self._load_static(step_batches, real_bs=real_bs, graph_bs=graph_bs)
        seq_lens_cpu = torch.full((graph_bs,), SEQ_LEN_FILL_VALUE, dtype=torch.int32)
        seq_lens_cpu[:real_bs] = step_batches[0].seq_lens_cpu  # host copy: no device sync
        self.draft_backend.init_forward_metadata_replay_cuda_graph(
            bs=graph_bs,
            req_pool_indices=self._static.req_pool_indices[:graph_bs],
            seq_lens=self._static.seq_lens[:graph_bs],
            seq_lens_cpu=seq_lens_cpu,
        )
        output = self.graphs[graph_bs].replay()
        return output[:, :real_bs].clone()

    @property
    def static_out_cache_loc(self) -> torch.Tensor:
        """The static `[num_steps, max_bs]` KV-slot buffer the graphs read (for inspection)."""
        return self._static.out_cache_loc

    def _forward_fn(self, bs: int) -> Callable[[], torch.Tensor]:
        """The graph body: every draft step reads static slices for batch size `bs`."""
        batches = [self._static_batch(step, bs) for step in range(self.num_steps)]
        backends = self.draft_backend.backends

        def forward() -> torch.Tensor:
            outputs = [
                self.model.forward(batch, backend)
                for batch, backend in zip(batches, backends, strict=True)
            ]
            return torch.stack(outputs)

        return forward

    def _static_batch(self, step: int, bs: int) -> ForwardBatch:
        static = self._static
        return ForwardBatch(
            forward_mode=ForwardMode.DECODE,
            batch_size=bs,
            input_ids=static.input_ids[step, :bs],
            req_pool_indices=static.req_pool_indices[:bs],
            seq_lens=static.seq_lens[:bs],
            seq_lens_cpu=torch.full((bs,), SEQ_LEN_FILL_VALUE, dtype=torch.int32),
            out_cache_loc=static.out_cache_loc[step, :bs],
            positions=static.positions[step, :bs],
            req_to_token_pool=self.req_to_token_pool,
            token_to_kv_pool=self.token_to_kv_pool,
            spec_info=DraftDecodeInput(topk=1, num_steps=self.num_steps),
        )

    def _load_static(
        self, step_batches: Sequence[ForwardBatch], *, real_bs: int, graph_bs: int
    ) -> None:
        """Copy live inputs into the static buffers; padded rows use page 0 and length 1."""
        static = self._static
        static.req_pool_indices[:real_bs].copy_(step_batches[0].req_pool_indices)
        static.req_pool_indices[real_bs:graph_bs].fill_(0)
        static.seq_lens[:real_bs].copy_(step_batches[0].seq_lens)
        static.seq_lens[real_bs:graph_bs].fill_(SEQ_LEN_FILL_VALUE)
        padding_slot = PADDING_PAGE * self.token_to_kv_pool.page_size
        for step, batch in enumerate(step_batches):
            static.input_ids[step, :real_bs].copy_(batch.input_ids)
            static.out_cache_loc[step, :real_bs].copy_(batch.out_cache_loc)
            static.positions[step, :real_bs].copy_(batch.positions)
            static.input_ids[step, real_bs:graph_bs].fill_(0)
            static.out_cache_loc[step, real_bs:graph_bs].fill_(padding_slot)
            static.positions[step, real_bs:graph_bs].fill_(0)

    def _allocate_static(self, max_bs: int) -> _StaticInputs:
        def zeros(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=self.device)

        steps = self.num_steps
        return _StaticInputs(
            input_ids=zeros((steps, max_bs), torch.int64),
            out_cache_loc=zeros((steps, max_bs), torch.int64),
            positions=zeros((steps, max_bs), torch.int64),
            req_pool_indices=zeros((max_bs,), torch.int64),
            seq_lens=torch.full(
                (max_bs,), SEQ_LEN_FILL_VALUE, dtype=torch.int32, device=self.device
            ),
        )

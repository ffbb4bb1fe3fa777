"""CUDA graphs of multi-layer EAGLE draft extend: a runner per step, a graph per batch size."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from fixes.cuda_graph.graph import CapturedGraph, capture, graph_memory_pool
from fixes.errors import CudaGraphError
from fixes.forward_batch import ForwardBatch, ForwardMode
from fixes.model.draft_model import DraftOutput, next_step_input_ids
from prtoggle import detect

logger = logging.getLogger(__name__)


class DraftExtendModel(Protocol):
    """What a draft-extend graph runner needs from one draft layer (e.g. TinyDraftModel)."""

    @property
    def hidden_size(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    def forward(self, input_ids: torch.Tensor, hidden_states: torch.Tensor) -> DraftOutput: ...


@dataclass
class DraftExtendBuffers:
    """Static tensors a captured draft-extend step reads and writes (sized for the max batch)."""

    input_ids: torch.Tensor  # [max_tokens] int64
    input_hidden_states: torch.Tensor  # [max_tokens, hidden]
    select_index: torch.Tensor  # [max_bs] int64: row of each request's last accepted token
    req_pool_indices: torch.Tensor  # [max_bs] int64
    extend_seq_lens: torch.Tensor  # [max_bs] int32
    extend_start_loc: torch.Tensor  # [max_bs] int32
    hidden_states: torch.Tensor  # [max_tokens, hidden]: the step's output hidden states


@dataclass(frozen=True)
class DraftExtendStepOutput:
    """One draft-extend step: output hidden states, next input ids, and the top-k drafts."""

    hidden_states: torch.Tensor  # [num_tokens, hidden]
    next_input_ids: torch.Tensor  # [num_tokens]
    topk_p: torch.Tensor  # [bs, topk]
    topk_index: torch.Tensor  # [bs, topk]


def draft_extend_step(
    model: DraftExtendModel,
    *,
    input_ids: torch.Tensor,
    hidden_states: torch.Tensor,
    select_index: torch.Tensor,
    tokens_per_req: int,
    topk: int,
) -> DraftExtendStepOutput:
    """Run one draft layer over the extend windows and pick each request's top-k next tokens."""
    output = model.forward(input_ids, hidden_states)
    probs = torch.softmax(output.logits[select_index], dim=-1)
    topk_p, topk_index = torch.topk(probs, topk, dim=-1)
    next_ids = next_step_input_ids(
        input_ids, tokens_per_req=tokens_per_req, new_tokens=topk_index[:, 0]
    )
    return DraftExtendStepOutput(output.hidden_states, next_ids, topk_p, topk_index)


@dataclass
class DraftExtendCudaGraphRunner:
    """Captured graphs of draft step `step` for each batch size in `capture_bs`."""

    model: DraftExtendModel
    step: int
    capture_bs: tuple[int, ...]
    tokens_per_req: int
    topk: int
    buffers: DraftExtendBuffers = field(init=False)
    graphs: dict[int, CapturedGraph[tuple[torch.Tensor, ...]]] = field(
        init=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        self.buffers = self._allocate_buffers(max(self.capture_bs))

    @property
    def max_bs(self) -> int:
        return max(self.capture_bs)

    def capture(self) -> None:
        """Fill the inputs with capture-time values, then capture one graph per batch size."""
        device = self.model.device
        pool = graph_memory_pool(device)
        for bs in sorted(self.capture_bs, reverse=True):
            self._fill_padding(0, self.max_bs)
            self.graphs[bs] = capture(
                functools.partial(self._forward, bs), device=device, pool=pool
            )

    def replay(
        self,
        forward_batch: ForwardBatch,
        *,
        input_ids: torch.Tensor,
        hidden_states: torch.Tensor,
        select_index: torch.Tensor,
    ) -> DraftExtendStepOutput:
        """Copy the live batch into the buffers (padding the rest), replay, slice the outputs."""
        bs = forward_batch.batch_size
        graph_bs = min(size for size in self.capture_bs if size >= bs)
        num_tokens = bs * self.tokens_per_req
        buffers = self.buffers
        buffers.input_ids[:num_tokens].copy_(input_ids)
        buffers.input_hidden_states[:num_tokens].copy_(hidden_states)
        buffers.select_index[:bs].copy_(select_index)
        buffers.req_pool_indices[:bs].copy_(forward_batch.req_pool_indices)
        if forward_batch.extend_seq_lens is None or forward_batch.extend_start_loc is None:
            raise CudaGraphError(
                "draft extend replay: forward_batch.extend_seq_lens and extend_start_loc "
                "must be set (DRAFT_EXTEND_V2 batch); got None"
            )
        buffers.extend_seq_lens[:bs].copy_(forward_batch.extend_seq_lens)
        buffers.extend_start_loc[:bs].copy_(forward_batch.extend_start_loc)
        self._fill_padding(bs, graph_bs)
        hidden, next_ids, topk_p, topk_index = self.graphs[graph_bs].replay()
        return DraftExtendStepOutput(
            hidden_states=hidden[:num_tokens],
            next_input_ids=next_ids[:num_tokens],
            topk_p=topk_p[:bs],
            topk_index=topk_index[:bs],
        )

    def _forward(self, bs: int) -> tuple[torch.Tensor, ...]:
        """The captured work: reads only the buffers; a tuple, so CPU replay can copy it."""
        num_tokens = bs * self.tokens_per_req
        buffers = self.buffers
        output = draft_extend_step(
            self.model,
            input_ids=buffers.input_ids[:num_tokens],
            hidden_states=buffers.input_hidden_states[:num_tokens],
            select_index=buffers.select_index[:bs],
            tokens_per_req=self.tokens_per_req,
            topk=self.topk,
        )
        buffers.hidden_states[:num_tokens].copy_(output.hidden_states)
        return (
            buffers.hidden_states[:num_tokens],
            output.next_input_ids,
            output.topk_p,
            output.topk_index,
        )

    def _fill_padding(self, start: int, end: int) -> None:
        """Capture-time values for requests `[start, end)`: row 0, full windows."""
        if start >= end:
            return
        buffers, per_req = self.buffers, self.tokens_per_req
        requests = torch.arange(start, end, device=self.model.device)
        buffers.input_ids[start * per_req : end * per_req].zero_()
        buffers.input_hidden_states[start * per_req : end * per_req].zero_()
        buffers.select_index[start:end].copy_(requests * per_req + per_req - 1)
        buffers.req_pool_indices[start:end].zero_()
        buffers.extend_seq_lens[start:end].fill_(per_req)
        buffers.extend_start_loc[start:end].copy_(requests * per_req)

    def _allocate_buffers(self, max_bs: int) -> DraftExtendBuffers:
        max_tokens = max_bs * self.tokens_per_req
        hidden = self.model.hidden_size
        device, dtype = self.model.device, self.model.dtype
        prefix = f"draft_extend_graph[step={self.step}]"

        def buffer(name: str, shape: tuple[int, ...], kind: torch.dtype) -> torch.Tensor:
            return detect.poisoned_buffer(shape, dtype=kind, device=device, name=f"{prefix}.{name}")

        return DraftExtendBuffers(
            input_ids=buffer("input_ids", (max_tokens,), torch.int64),
            input_hidden_states=buffer("input_hidden_states", (max_tokens, hidden), dtype),
            select_index=buffer("select_index", (max_bs,), torch.int64),
            req_pool_indices=buffer("req_pool_indices", (max_bs,), torch.int64),
            extend_seq_lens=buffer("extend_seq_lens", (max_bs,), torch.int32),
            extend_start_loc=buffer("extend_start_loc", (max_bs,), torch.int32),
            hidden_states=buffer("hidden_states", (max_tokens, hidden), dtype),
        )


@dataclass
class MultiStepDraftExtendCudaGraphRunner:
    """The per-step runners of one multi-layer draft extend, and which batches they can run."""

    runners: list[DraftExtendCudaGraphRunner]

    def can_run(self, forward_batch: ForwardBatch) -> bool:
        """A DRAFT_EXTEND_V2 batch no larger than the largest captured batch size."""
        fits = forward_batch.batch_size <= self.runners[0].max_bs
        return forward_batch.forward_mode is ForwardMode.DRAFT_EXTEND_V2 and fits

    def get_runner(self, step: int) -> DraftExtendCudaGraphRunner:
        return self.runners[step]

    def get_last_runner(self) -> DraftExtendCudaGraphRunner:
        return self.runners[-1]

    def capture(self) -> None:
        for runner in self.runners:
            logger.debug("capturing draft extend step %d for %s", runner.step, runner.capture_bs)
            runner.capture()


def build_draft_extend_graph_runner(
    models: Sequence[DraftExtendModel],
    *,
    capture_bs: tuple[int, ...],
    tokens_per_req: int,
    topk: int,
) -> MultiStepDraftExtendCudaGraphRunner:
    """Runners for every draft step, captured and ready to replay."""
    runner = MultiStepDraftExtendCudaGraphRunner(
        runners=[
            DraftExtendCudaGraphRunner(
                model=model,
                step=step,
                capture_bs=capture_bs,
                tokens_per_req=tokens_per_req,
                topk=topk,
            )
            for step, model in enumerate(models)
        ]
    )
    runner.capture()
    return runner

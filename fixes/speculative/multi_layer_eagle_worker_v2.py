"""Multi-layer EAGLE draft extend after verification, and the hidden-state pool it keeps."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from fixes.cuda_graph.draft_extend_runner import (
    DraftExtendStepOutput,
    MultiStepDraftExtendCudaGraphRunner,
    draft_extend_step,
)
from fixes.forward_batch import ForwardBatch
from fixes.kernels.hidden_states_pool import assign_hidden_states_pool
from fixes.model.draft_model import TinyDraftModel
from prtoggle import detect

logger = logging.getLogger(__name__)

SITE = "multi_layer_eagle"


@dataclass(frozen=True)
class VerifyResult:
    """What target verification hands the draft extend: hidden states and accept lengths."""

    hidden_states: torch.Tensor  # [bs * tokens_per_req, hidden]
    next_token_ids: torch.Tensor  # [bs * tokens_per_req]: each window's verified tokens
    accept_lens: torch.Tensor  # [bs] int64: accepted tokens per request (>= 1)


@dataclass(frozen=True)
class DraftExtendResult:
    """Top-k drafts of every step, concatenated along dim 1: `[bs, num_steps * topk]`."""

    topk_p: torch.Tensor
    topk_index: torch.Tensor
    used_cuda_graph: bool


@dataclass
class MultiLayerEagleWorkerV2:
    """Draft side of multi-layer EAGLE: one draft layer per step, graph-replayed when it fits.

    `req_to_hidden_states_pool[row]` keeps the last `speculative_num_steps - 1` hidden
    states of request `row`'s latest extend window (for KV-cache rollback).
    """

    draft_models: list[TinyDraftModel]
    topk: int
    pool_rows: int
    cuda_graph_runner_for_draft_extend: MultiStepDraftExtendCudaGraphRunner | None = None
    hidden_states_provider: str = "torch"
    req_to_hidden_states_pool: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        model = self.draft_models[0]
        self.req_to_hidden_states_pool = torch.zeros(
            (self.pool_rows, self.speculative_num_steps - 1, model.hidden_size),
            dtype=model.dtype,
            device=model.device,
        )

    @property
    def speculative_num_steps(self) -> int:
        return len(self.draft_models)

    @property
    def tokens_per_req(self) -> int:
        """Every request's extend window: the verified token plus one per draft step."""
        return self.speculative_num_steps + 1

    def _draft_extend_for_decode(
        self, forward_batch: ForwardBatch, verify: VerifyResult
    ) -> DraftExtendResult:
        """Re-run the draft layers over the verified windows; update the hidden-state pool."""
        can_cuda_graph = bool(
            self.cuda_graph_runner_for_draft_extend
            and self.cuda_graph_runner_for_draft_extend.can_run(forward_batch)
        )
        if not can_cuda_graph:
            logger.debug("draft extend runs eagerly (batch of %d)", forward_batch.batch_size)
        outputs = self._run_draft_extend_steps(forward_batch, verify, use_graph=can_cuda_graph)
        draft_output = outputs[-1]

        # Update req_to_hidden_states_pool for KV-cache rollback.
        if (
            forward_batch.extend_seq_lens is not None
            and forward_batch.extend_start_loc is not None
            and self.cuda_graph_runner_for_draft_extend is not None
        ):
            if can_cuda_graph:
                last_runner = self.cuda_graph_runner_for_draft_extend.get_last_runner()
                hidden_states = last_runner.buffers.hidden_states
                req_pool_indices = last_runner.buffers.req_pool_indices
                extend_seq_lens = last_runner.buffers.extend_seq_lens
                extend_start_loc = last_runner.buffers.extend_start_loc
            else:
                hidden_states = draft_output.hidden_states
                req_pool_indices = forward_batch.req_pool_indices
                extend_seq_lens = forward_batch.extend_seq_lens
                extend_start_loc = forward_batch.extend_start_loc
            self._maybe_check_pool_inputs(forward_batch.batch_size, req_pool_indices)
            assign_hidden_states_pool(
                hidden_states=hidden_states,
                req_pool_indices=req_pool_indices,
                req_to_hidden_states_pool=self.req_to_hidden_states_pool,
                pool_size=self.speculative_num_steps - 1,
                num_seqs=forward_batch.batch_size,
                extend_seq_lens=extend_seq_lens,
                extend_start_loc=extend_start_loc,
                provider=self.hidden_states_provider,
            )
            detect.maybe_detect_nan(
                self.req_to_hidden_states_pool, f"{SITE}.req_to_hidden_states_pool"
            )
        return DraftExtendResult(
            topk_p=torch.cat([out.topk_p for out in outputs], dim=1).clone(),
            topk_index=torch.cat([out.topk_index for out in outputs], dim=1).clone(),
            used_cuda_graph=can_cuda_graph,
        )

    def _run_draft_extend_steps(
        self, forward_batch: ForwardBatch, verify: VerifyResult, *, use_graph: bool
    ) -> list[DraftExtendStepOutput]:
        """Every draft step, chained: step `i + 1` reads step `i`'s ids and hidden states."""
        per_req = self.tokens_per_req
        requests = torch.arange(forward_batch.batch_size, device=verify.accept_lens.device)
        select_index = requests * per_req + verify.accept_lens.long() - 1
        input_ids, hidden_states = verify.next_token_ids, verify.hidden_states
        outputs = []
        for step, model in enumerate(self.draft_models):
            if use_graph and self.cuda_graph_runner_for_draft_extend is not None:
                output = self.cuda_graph_runner_for_draft_extend.get_runner(step).replay(
                    forward_batch,
                    input_ids=input_ids,
                    hidden_states=hidden_states,
                    select_index=select_index,
                )
            else:
                output = draft_extend_step(
                    model,
                    input_ids=input_ids,
                    hidden_states=hidden_states,
                    select_index=select_index,
                    tokens_per_req=per_req,
                    topk=self.topk,
                )
            outputs.append(output)
            input_ids, hidden_states = output.next_input_ids, output.hidden_states
        return outputs

    def _maybe_check_pool_inputs(self, num_seqs: int, req_pool_indices: torch.Tensor) -> None:
        """Probes: the kernel's grid fits its index tensor; the indices fit the pool."""
        site = f"{SITE}.assign_hidden_states_pool.req_pool_indices"
        detect.maybe_check_host_range(num_seqs, 0, req_pool_indices.shape[0] + 1, f"{site}.len")
        detect.maybe_detect_oob(req_pool_indices[:num_seqs], 0, self.pool_rows, site)

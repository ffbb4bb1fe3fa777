"""Multi-step EAGLE draft decoding over an MLA KV cache, eager or through CUDA graphs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from fixes.errors import AttentionBackendError
from fixes.forward_batch import ForwardBatch
from fixes.kernels.draft_kv_indices import (
    draft_kv_indices_row_len,
    generate_draft_decode_kv_indices,
    storage_tail_view,
)
from fixes.kernels.mla_attention import (
    FlashInferMLADecode,
    MLAShape,
    check_provider,
    flashinfer_workspace,
    mla_paged_decode_torch,
)
from fixes.memory_pool import MLATokenToKVPool, ReqToTokenPool
from prtoggle import detect
from prtoggle.errors import OOBDetected

logger = logging.getLogger(__name__)

SITE = "flashinfer_mla"


@dataclass
class DraftStepMetadata:
    """What draft step `step` attends over: one KV range per (request, branch) row."""

    step: int
    bs: int  # rows = num_seqs * topk
    kv_indptr: torch.Tensor  # [bs + 1] int32
    kv_indices: torch.Tensor  # 1-D, read from kv_indptr[0] on, as through a pointer
    flashinfer: FlashInferMLADecode | None = None  # planned wrapper (graph path, flashinfer)


@dataclass
class FlashInferMLAMultiStepDraftBackend:
    """One MLA decode attention per draft step; step `i` attends `seq_len + i + 1` entries.

    `kv_indices_provider` picks the kernel that fills the per-step KV slot lists
    ("triton" or "torch"); `attention_provider` the attention ("torch" or "flashinfer").
    """

    req_to_token_pool: ReqToTokenPool
    kv_pool: MLATokenToKVPool
    shape: MLAShape
    topk: int
    speculative_num_steps: int
    kv_indices_provider: str = "torch"
    attention_provider: str = "torch"
    kv_indptr: torch.Tensor = field(init=False)
    step_metadata: list[DraftStepMetadata] = field(init=False, default_factory=list)
    cuda_graph_kv_indices: torch.Tensor | None = field(init=False, default=None)
    graph_wrappers: dict[tuple[int, int], FlashInferMLADecode] = field(
        init=False, default_factory=dict
    )  # (step, bs) -> flashinfer wrapper bound to the graph buffers
    eager_kv_indices: torch.Tensor | None = field(init=False, default=None)  # kept for check()
    _workspace: torch.Tensor | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        check_provider(self.attention_provider)
        max_bs = self.req_to_token_pool.size * self.topk
        self.kv_indptr = detect.poisoned_buffer(
            (self.speculative_num_steps, max_bs + 1),
            dtype=torch.int32,
            device=self.device,
            name=f"{SITE}.kv_indptr",
        )

    @property
    def device(self) -> torch.device:
        return self.req_to_token_pool.device

    @property
    def max_context_len(self) -> int:
        return self.req_to_token_pool.max_context_len

    @property
    def num_attention_steps(self) -> int:
        """Draft steps that run attention (the first draft token comes from draft extend)."""
        return self.speculative_num_steps - 1

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        """Eager path: a fresh kv_indices buffer sized for this batch."""
        width = forward_batch.batch_size * self.topk * self.max_context_len
        kv_indices = detect.poisoned_buffer(
            (self.speculative_num_steps, width),
            dtype=torch.int32,
            device=self.device,
            name=f"{SITE}.eager_kv_indices",
        )
        self.eager_kv_indices = kv_indices  # its redzone stays checked while the step runs

        def record_step(step: int, bs: int) -> None:
            self._record_step(
                step,
                bs=bs,
                kv_indptr=self.kv_indptr[step, : bs + 1].clone(),
                kv_indices=storage_tail_view(kv_indices, start=step * kv_indices.stride(0)),
            )

        self.common_template(forward_batch, kv_indices, record_step)

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int) -> None:
        """Static kv_indices rows shared by capture and every replay (one row per step)."""
        logger.debug("MLA draft graph state: max_bs=%d max_num_tokens=%d", max_bs, max_num_tokens)
        self.cuda_graph_kv_indices = detect.poisoned_buffer(
            (self.speculative_num_steps, max_bs * self.topk * self.max_context_len),
            dtype=torch.int32,
            device=self.device,
            name=f"{SITE}.cuda_graph_kv_indices",
        )
        self.graph_wrappers = {}

    def init_forward_metadata_capture_cuda_graph(self, forward_batch: ForwardBatch) -> None:
        self._graph_metadata(forward_batch)

    def init_forward_metadata_replay_cuda_graph(self, forward_batch: ForwardBatch) -> None:
        self._graph_metadata(forward_batch)

    def common_template(
        self,
        forward_batch: ForwardBatch,
        kv_indices_buffer: torch.Tensor,
        call_fn: Callable[[int, int], None],
    ) -> None:
        """Fill every step's KV slot list into `kv_indices_buffer`, then set up each step."""
        num_seqs = forward_batch.batch_size
        bs = self.topk * num_seqs
        seq_lens_sum = forward_batch.seq_lens_sum
        row_width = int(kv_indices_buffer.shape[1])
        self._maybe_check_row_widths(seq_lens_sum, num_seqs=num_seqs, row_width=row_width)
        self._require_rows_fit(seq_lens_sum=seq_lens_sum, num_seqs=num_seqs, row_width=row_width)
        generate_draft_decode_kv_indices(
            req_pool_indices=forward_batch.req_pool_indices,
            req_to_token=self.req_to_token_pool.req_to_token,
            seq_lens=forward_batch.seq_lens,
            kv_indices=kv_indices_buffer,
            kv_indptr=self.kv_indptr,
            topk=self.topk,
            provider=self.kv_indices_provider,
        )
        self.step_metadata = []
        for step in range(self.num_attention_steps):
            call_fn(step, bs)

    def forward_decode(
        self, step: int, q_nope: torch.Tensor, q_pe: torch.Tensor, *, layer_id: int = 0
    ) -> torch.Tensor:
        """Attention of draft step `step` for `[bs, H, *]` queries (one per request branch)."""
        metadata = self.step_metadata[step]
        kv_cache = self.kv_pool.get_key_buffer(layer_id)
        if self.attention_provider == "flashinfer":
            decode = metadata.flashinfer or self._flashinfer_eager(metadata)
            output = decode.run(q_nope=q_nope, q_pe=q_pe, kv_cache=kv_cache)
        else:
            output = mla_paged_decode_torch(
                q_nope=q_nope,
                q_pe=q_pe,
                kv_cache=kv_cache,
                kv_indptr=metadata.kv_indptr,
                kv_indices=metadata.kv_indices,
                shape=self.shape,
                max_kv_len=self.max_context_len,
            )
        detect.maybe_detect_nan(output, f"{SITE}.draft_decode[step={step}].output")
        return output

    def _graph_metadata(self, forward_batch: ForwardBatch) -> None:
        buffer = self.cuda_graph_kv_indices
        if buffer is None:
            raise AttentionBackendError(
                f"{SITE}: CUDA graph metadata requested before init_cuda_graph_state(); "
                "expected init_cuda_graph_state(max_bs, max_num_tokens) first"
            )

        def record_step(step: int, bs: int) -> None:
            self._record_step(
                step,
                bs=bs,
                kv_indptr=self.kv_indptr[step, : bs + 1],
                kv_indices=storage_tail_view(buffer, start=step * buffer.stride(0)),
            )
            if self.attention_provider == "flashinfer":
                decode = self._graph_wrapper(step, bs, buffer)
                decode.plan(
                    kv_indptr_cpu=self._host_kv_indptr(forward_batch, step),
                    dtype=self.kv_pool.dtype,
                )
                self.step_metadata[-1].flashinfer = decode

        self.common_template(forward_batch, buffer, record_step)

    def _record_step(
        self, step: int, *, bs: int, kv_indptr: torch.Tensor, kv_indices: torch.Tensor
    ) -> None:
        self.step_metadata.append(
            DraftStepMetadata(step=step, bs=bs, kv_indptr=kv_indptr, kv_indices=kv_indices)
        )

    def _maybe_check_row_widths(self, seq_lens_sum: int, *, num_seqs: int, row_width: int) -> None:
        """Probe (SGLANG_SPEC_OOB_DETECTION=1): each step's row length fits the row width."""
        for step in range(self.speculative_num_steps):
            needed = draft_kv_indices_row_len(
                seq_lens_sum=seq_lens_sum, topk=self.topk, num_seqs=num_seqs, step=step
            )
            detect.maybe_check_host_range(
                needed, 0, row_width + 1, f"{SITE}.draft_kv_indices[step={step}].row_width"
            )

    def _require_rows_fit(self, *, seq_lens_sum: int, num_seqs: int, row_width: int) -> None:
        """The kernel does not bounds-check its rows: refuse a launch whose last row overflows."""
        last_step = self.speculative_num_steps - 1
        needed = draft_kv_indices_row_len(
            seq_lens_sum=seq_lens_sum, topk=self.topk, num_seqs=num_seqs, step=last_step
        )
        if needed > row_width:
            raise OOBDetected(
                f"{SITE}: EAGLE draft kv_indices row too small: step {last_step} needs "
                f"{needed} entries = seq_lens_sum {seq_lens_sum} * topk {self.topk} + "
                f"num_seqs {num_seqs} * topk {self.topk} * (step {last_step} + 1), but the "
                f"row width is {row_width}; size the buffer max_bs * topk * max_context_len "
                f"(max_context_len {self.max_context_len})"
            )

    def _host_kv_indptr(self, forward_batch: ForwardBatch, step: int) -> torch.Tensor:
        lengths = forward_batch.seq_lens_cpu.long().repeat_interleave(self.topk) + step + 1
        return torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]).to(torch.int32)

    def _graph_wrapper(self, step: int, bs: int, buffer: torch.Tensor) -> FlashInferMLADecode:
        """The wrapper of (step, bs), bound to kv_indptr row `step` and kv_indices row `step`."""
        key = (step, bs)
        if key not in self.graph_wrappers:
            self.graph_wrappers[key] = FlashInferMLADecode(
                shape=self.shape,
                kv_indptr=self.kv_indptr[step, : bs + 1],
                kv_indices=buffer[step],
                bs=bs,
                workspace=self._flashinfer_workspace(),
            )
        return self.graph_wrappers[key]

    def _flashinfer_eager(self, metadata: DraftStepMetadata) -> FlashInferMLADecode:
        decode = FlashInferMLADecode(
            shape=self.shape,
            kv_indptr=metadata.kv_indptr.clone(),
            kv_indices=metadata.kv_indices,
            bs=metadata.bs,
            workspace=self._flashinfer_workspace(),
        )
        decode.plan(kv_indptr_cpu=metadata.kv_indptr.cpu(), dtype=self.kv_pool.dtype)
        return decode

    def _flashinfer_workspace(self) -> torch.Tensor:
        if self._workspace is None:
            self._workspace = flashinfer_workspace(self.device)
        return self._workspace

"""What the TRT-LLM FMHA kernels of one forward read: the metadata, its graph buffers, probes.

`ForwardMetadata` is built per forward (eager) or bound to `GraphBuffers` (CUDA graphs);
`GRAPH_KINDS` names the forward kinds a graph can hold, each with its own buffers. The
backend (trtllm_mha_backend.py) decides *what* goes in; this module says *where* each
tensor lives and how it is written and probed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fixes.errors import AttentionBackendError
from fixes.forward_batch import (
    DraftExtendInput,
    ForwardBatch,
    ForwardMode,
    SpecInput,
    VerifyInput,
    is_draft_decode,
    require_spec_input,
)
from fixes.memory_pool import page_table
from prtoggle import detect

__all__ = [
    "GRAPH_KINDS",
    "ForwardMetadata",
    "GraphBuffers",
    "cumsum_with_zero",
    "extend_query_lengths",
    "graph_kind",
    "mode_site",
    "query_lengths",
]


GRAPH_KINDS = ("decode", "target_verify", "draft_extend")
"""Forward kinds a CUDA graph can hold; each has its own pre-allocated metadata buffers."""


@dataclass
class ForwardMetadata:
    """What the kernels of one forward read; device tensors live on the pool's device.

    In a CUDA graph the tensors are views into `GraphBuffers` (their addresses are baked
    into the graph); the host ints are fixed at capture and updated at replay.
    """

    cache_seq_lens: torch.Tensor  # [bs] int32, device: KV entries each request attends to
    cu_seq_lens_q: torch.Tensor  # [bs + 1] int32, device: first query row of each request
    cu_seq_lens_k: torch.Tensor  # [bs + 1] int32, device: prefix sums of cache_seq_lens
    page_table: torch.Tensor  # [bs, pages] int32, device: KV page of each request's page j
    max_seq_len_q: int  # host: longest query of the batch (q_len_per_req for decode kernel)
    max_seq_len_k: int  # host: longest KV range of the batch

    @property
    def batch_size(self) -> int:
        """Requests the metadata was built for (host, from a tensor shape)."""
        return int(self.cu_seq_lens_q.shape[0]) - 1

    def write_page_table(
        self, *, req_to_token: torch.Tensor, req_pool_indices: torch.Tensor, page_size: int
    ) -> None:
        """Write the first pages covering `max_seq_len_k` tokens of each request."""
        num_pages = min(-(-self.max_seq_len_k // page_size), int(self.page_table.shape[1]))
        if num_pages == 0 or self.page_table.shape[0] == 0:
            return
        self.page_table[:, :num_pages].copy_(
            page_table(req_to_token, req_pool_indices, max_pages=num_pages, page_size=page_size)
        )

    def probe(
        self, *, site: str, min_kv_len: int, max_context_len: int, num_pages: int, page_size: int
    ) -> None:
        """Sync-free range probes: KV lengths, prefix-sum steps, and the pages the kernel reads."""
        if not detect.oob_detection_enabled():
            return  # off: no diff kernels either
        detect.maybe_detect_oob(
            self.cache_seq_lens, min_kv_len, max_context_len + 1, f"{site}.cache_seq_lens"
        )
        for name in ("cu_seq_lens_q", "cu_seq_lens_k"):
            steps = torch.diff(getattr(self, name))
            detect.maybe_detect_oob(steps, 0, max_context_len + 1, f"{site}.{name}.steps")
        used_pages = -(-self.max_seq_len_k // page_size)
        detect.maybe_detect_oob(self.page_table[:, :used_pages], 0, num_pages, f"{site}.page_table")


@dataclass
class GraphBuffers:
    """Pre-allocated metadata storage for CUDA graphs of one kind, sized for `max_bs`.

    Allocated through `prtoggle.detect.poisoned_buffer` with fill 0: a slot the capture
    or replay path forgets to write reads 0 (or the poison under SGLANG_DEBUG_POISON).
    """

    cache_seq_lens: torch.Tensor  # [max_bs] int32, device
    cu_seq_lens_q: torch.Tensor  # [max_bs + 1] int32, device
    cu_seq_lens_k: torch.Tensor  # [max_bs + 1] int32, device
    page_table: torch.Tensor  # [max_bs, max_pages] int32, device

    @classmethod
    def allocate(
        cls, *, mode_name: str, max_bs: int, max_pages: int, device: torch.device
    ) -> GraphBuffers:
        """Zero-filled (or poisoned) buffers named `trtllm_mha.<mode_name>.<field>`.

        `mode_name` says which graph kind and draft step, e.g. `decode[step=0]`.
        """

        def buffer(name: str, shape: tuple[int, ...]) -> torch.Tensor:
            return detect.poisoned_buffer(
                shape, dtype=torch.int32, device=device, name=f"trtllm_mha.{mode_name}.{name}"
            )

        return cls(
            cache_seq_lens=buffer("cache_seq_lens", (max_bs,)),
            cu_seq_lens_q=buffer("cu_seq_lens_q", (max_bs + 1,)),
            cu_seq_lens_k=buffer("cu_seq_lens_k", (max_bs + 1,)),
            page_table=buffer("page_table", (max_bs, max_pages)),
        )


def cumsum_with_zero(lengths: torch.Tensor) -> torch.Tensor:
    """`[0, l0, l0+l1, ...]` as int32 on the lengths' device."""
    zero = torch.zeros(1, dtype=torch.int32, device=lengths.device)
    return torch.cat([zero, torch.cumsum(lengths, dim=0, dtype=torch.int32)])


def mode_site(forward_mode: ForwardMode, spec_info: SpecInput | None, step: int) -> str:
    """Site prefix naming the kind of forward, e.g. `trtllm_mha.draft_decode[step=0]`."""
    if is_draft_decode(forward_mode, spec_info):
        return f"trtllm_mha.draft_decode[step={step}]"
    if forward_mode.is_decode_or_idle():
        return "trtllm_mha.decode"
    if forward_mode.is_target_verify():
        return "trtllm_mha.target_verify"
    if forward_mode.is_draft_extend_v2():
        return "trtllm_mha.draft_extend"
    return "trtllm_mha.extend"


def graph_kind(mode: ForwardMode, spec_info: SpecInput | None) -> str:
    """Which pre-allocated buffers a graph of this mode uses (one of GRAPH_KINDS)."""
    if mode.is_decode_or_idle():
        return "decode"
    if mode.is_target_verify():
        return "target_verify"
    if mode.is_draft_extend_v2():
        return "draft_extend"
    raise AttentionBackendError(
        f"forward mode {mode.name} has no CUDA graph in the TRT-LLM MHA backend; "
        f"choices: DECODE, IDLE, TARGET_VERIFY, DRAFT_EXTEND_V2 (spec_info={spec_info!r})"
    )


def query_lengths(
    kind: str, bs: int, spec_info: SpecInput | None, device: torch.device
) -> tuple[torch.Tensor, int]:
    """Per-request query lengths `[bs]` int32 and their maximum, for a kind of GRAPH_KINDS
    (eager or graph: the first `bs` requests of the spec input)."""
    if kind == "decode":
        return torch.ones(bs, dtype=torch.int32, device=device), 1
    if kind == "target_verify":
        verify = require_spec_input(spec_info, VerifyInput, ForwardMode.TARGET_VERIFY)
        num = verify.draft_token_num
        return torch.full((bs,), num, dtype=torch.int32, device=device), num
    draft_extend = require_spec_input(spec_info, DraftExtendInput, ForwardMode.DRAFT_EXTEND_V2)
    q_lens = draft_extend.accept_lengths[:bs].to(torch.int32)
    return q_lens, max(draft_extend.accept_lengths_cpu[:bs], default=0)


def extend_query_lengths(forward_batch: ForwardBatch) -> tuple[torch.Tensor, int]:
    """Per-request new-token counts `[bs]` int32 of an EXTEND batch, and their maximum."""
    if forward_batch.extend_seq_lens is None or forward_batch.extend_seq_lens_cpu is None:
        raise AttentionBackendError(
            f"{forward_batch.forward_mode.name} batch without extend_seq_lens / "
            "extend_seq_lens_cpu; an extend batch must carry both"
        )
    lens = forward_batch.extend_seq_lens.to(torch.int32)
    return lens, max(forward_batch.extend_seq_lens_cpu, default=0)

"""Forward metadata of the TRT-LLM MHA backend: the dataclass, graph buffers, builders, probes."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fixes.forward_batch import (
    DraftDecodeInput,
    DraftExtendInput,
    ForwardBatch,
    ForwardMode,
    SpecInput,
    VerifyInput,
)
from fixes.memory_pool import page_table
from prtoggle import detect
from prtoggle.errors import PrToggleError

__all__ = [
    "GRAPH_KINDS",
    "AttentionBackendError",
    "AttentionLayer",
    "ForwardMetadata",
    "GraphBuffers",
    "allocate_graph_buffers",
    "cumsum_with_zero",
    "draft_extend_input",
    "extend_query_lengths",
    "graph_kind",
    "graph_query_lengths",
    "is_draft_decode",
    "mode_site",
    "probe_metadata",
    "verify_input",
    "write_page_table",
]


GRAPH_KINDS = ("decode", "target_verify", "draft_extend")
"""Forward kinds a CUDA graph can hold; each has its own pre-allocated metadata buffers."""


class AttentionBackendError(PrToggleError):
    """The backend was driven outside its protocol (missing metadata, wrong spec input)."""


@dataclass(frozen=True)
class AttentionLayer:
    """Shape of one attention layer as the backend sees it."""

    layer_id: int
    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    scaling: float


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


@dataclass
class GraphBuffers:
    """Pre-allocated metadata storage for CUDA graphs of one mode, sized for `max_bs`.

    Allocated through `prtoggle.detect.poisoned_buffer` with fill 0: a slot the capture
    or replay path forgets to write reads 0 (or the poison under SGLANG_DEBUG_POISON).
    """

    cache_seq_lens: torch.Tensor  # [max_bs] int32, device
    cu_seq_lens_q: torch.Tensor  # [max_bs + 1] int32, device
    cu_seq_lens_k: torch.Tensor  # [max_bs + 1] int32, device
    page_table: torch.Tensor  # [max_bs, max_pages] int32, device


def allocate_graph_buffers(
    *, mode_name: str, max_bs: int, max_pages: int, device: torch.device
) -> GraphBuffers:
    """Zero-filled (or poisoned) buffers named `trtllm_mha.<mode_name>.<field>`.

    `mode_name` says which graph kind and draft step, e.g. `decode[step=0]`.
    """

    def buffer(field: str, shape: tuple[int, ...]) -> torch.Tensor:
        return detect.poisoned_buffer(
            shape, dtype=torch.int32, device=device, name=f"trtllm_mha.{mode_name}.{field}"
        )

    return GraphBuffers(
        cache_seq_lens=buffer("cache_seq_lens", (max_bs,)),
        cu_seq_lens_q=buffer("cu_seq_lens_q", (max_bs + 1,)),
        cu_seq_lens_k=buffer("cu_seq_lens_k", (max_bs + 1,)),
        page_table=buffer("page_table", (max_bs, max_pages)),
    )


def cumsum_with_zero(lengths: torch.Tensor) -> torch.Tensor:
    """`[0, l0, l0+l1, ...]` as int32 on the lengths' device."""
    zero = torch.zeros(1, dtype=torch.int32, device=lengths.device)
    return torch.cat([zero, torch.cumsum(lengths, dim=0, dtype=torch.int32)])


def write_page_table(
    dst: torch.Tensor,
    *,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    max_seq_len_k: int,
    page_size: int,
) -> None:
    """Write the first pages covering `max_seq_len_k` tokens of each request into `dst`."""
    num_pages = min(-(-max_seq_len_k // page_size), int(dst.shape[1]))
    if num_pages == 0 or dst.shape[0] == 0:
        return
    dst[:, :num_pages].copy_(
        page_table(req_to_token, req_pool_indices, max_pages=num_pages, page_size=page_size)
    )


def mode_site(forward_mode: ForwardMode, spec_info: SpecInput | None, step: int) -> str:
    """Site prefix naming the kind of forward, e.g. `trtllm_mha.draft_decode[step=0]`."""
    if forward_mode.is_decode_or_idle():
        if isinstance(spec_info, DraftDecodeInput):
            return f"trtllm_mha.draft_decode[step={step}]"
        return "trtllm_mha.decode"
    if forward_mode.is_target_verify():
        return "trtllm_mha.target_verify"
    if forward_mode.is_draft_extend_v2():
        return "trtllm_mha.draft_extend"
    return "trtllm_mha.extend"


def probe_metadata(
    metadata: ForwardMetadata,
    *,
    site: str,
    min_kv_len: int,
    max_context_len: int,
    num_pages: int,
    page_size: int,
) -> None:
    """Sync-free range probes: KV lengths, prefix-sum steps, and the pages the kernel reads."""
    if not detect.oob_detection_enabled():
        return  # off: no diff kernels either
    detect.maybe_detect_oob(
        metadata.cache_seq_lens, min_kv_len, max_context_len + 1, f"{site}.cache_seq_lens"
    )
    for name in ("cu_seq_lens_q", "cu_seq_lens_k"):
        steps = torch.diff(getattr(metadata, name))
        detect.maybe_detect_oob(steps, 0, max_context_len + 1, f"{site}.{name}.steps")
    used_pages = -(-metadata.max_seq_len_k // page_size)
    detect.maybe_detect_oob(metadata.page_table[:, :used_pages], 0, num_pages, f"{site}.page_table")


def is_draft_decode(mode: ForwardMode, spec_info: SpecInput | None) -> bool:
    """A decode batch of a multi-step draft (its lengths grow by step + 1)."""
    return mode.is_decode_or_idle() and isinstance(spec_info, DraftDecodeInput)


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


def graph_query_lengths(
    kind: str, bs: int, spec_info: SpecInput | None, device: torch.device
) -> tuple[torch.Tensor, int]:
    """Per-request query lengths `[bs]` int32 and their maximum, for a graph kind."""
    if kind == "decode":
        return torch.ones(bs, dtype=torch.int32, device=device), 1
    if kind == "target_verify":
        num = verify_input(spec_info, ForwardMode.TARGET_VERIFY).draft_token_num
        return torch.full((bs,), num, dtype=torch.int32, device=device), num
    draft_extend = draft_extend_input(spec_info, ForwardMode.DRAFT_EXTEND_V2)
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


def verify_input(spec_info: SpecInput | None, mode: ForwardMode) -> VerifyInput:
    """`spec_info` as a VerifyInput, or an error naming the mode and what was passed."""
    if not isinstance(spec_info, VerifyInput):
        raise AttentionBackendError(
            f"{mode.name} needs spec_info of type VerifyInput, got {type(spec_info).__name__}"
        )
    return spec_info


def draft_extend_input(spec_info: SpecInput | None, mode: ForwardMode) -> DraftExtendInput:
    """`spec_info` as a DraftExtendInput, or an error naming the mode and what was passed."""
    if not isinstance(spec_info, DraftExtendInput):
        raise AttentionBackendError(
            f"{mode.name} needs spec_info of type DraftExtendInput, got {type(spec_info).__name__}"
        )
    return spec_info

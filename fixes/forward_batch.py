"""Forward modes, the per-step batch description, and speculative-decoding inputs."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import torch

from fixes.errors import AttentionBackendError

if TYPE_CHECKING:
    from fixes.memory_pool import ReqToTokenPool, TokenToKVPool


class ForwardMode(enum.IntEnum):
    """What one forward pass does; the attention backend routes on it."""

    EXTEND = enum.auto()  # prefill: each request appends a chunk of new tokens
    DECODE = enum.auto()  # one new token per request
    IDLE = enum.auto()  # no tokens on this rank (DP attention keeps ranks in step)
    TARGET_VERIFY = enum.auto()  # target model checks draft tokens; equal count per request
    DRAFT_EXTEND_V2 = enum.auto()  # draft model re-runs accepted tokens; counts differ

    def is_extend(self) -> bool:
        """Modes whose requests carry several query tokens (prefill-shaped metadata)."""
        return self in (
            ForwardMode.EXTEND,
            ForwardMode.TARGET_VERIFY,
            ForwardMode.DRAFT_EXTEND_V2,
        )

    def is_decode(self) -> bool:
        return self is ForwardMode.DECODE

    def is_idle(self) -> bool:
        return self is ForwardMode.IDLE

    def is_decode_or_idle(self) -> bool:
        return self in (ForwardMode.DECODE, ForwardMode.IDLE)

    def is_target_verify(self) -> bool:
        return self is ForwardMode.TARGET_VERIFY

    def is_draft_extend_v2(self) -> bool:
        return self is ForwardMode.DRAFT_EXTEND_V2

    def is_cuda_graph(self) -> bool:
        """Modes that a CUDA graph runner may capture and replay."""
        return self in (
            ForwardMode.DECODE,
            ForwardMode.IDLE,
            ForwardMode.TARGET_VERIFY,
            ForwardMode.DRAFT_EXTEND_V2,
        )


@dataclass
class DraftDecodeInput:
    """Multi-step draft decoding: `topk` branches per request, `num_steps` draft steps.

    At step `i` (the backend's `speculative_step_id`) each request attends to
    `seq_len + i + 1` KV entries: its prefix plus the draft tokens written so far.
    """

    topk: int
    num_steps: int


@dataclass
class VerifyInput:
    """Target verification: every request checks the same number of draft tokens."""

    draft_token_num: int  # query tokens per request (host int)
    topk: int = 1


@dataclass
class DraftExtendInput:
    """Draft extend after verification: request b re-runs `accept_lengths[b]` tokens."""

    accept_lengths: torch.Tensor  # [bs] int32, device
    accept_lengths_cpu: list[int]  # host copy, same values

    @property
    def max_accept_length(self) -> int:
        return max(self.accept_lengths_cpu, default=0)


SpecInput = DraftDecodeInput | VerifyInput | DraftExtendInput
SpecInputT = TypeVar("SpecInputT", DraftDecodeInput, VerifyInput, DraftExtendInput)


def require_spec_input(
    spec_info: SpecInput | None, expected: type[SpecInputT], mode: ForwardMode
) -> SpecInputT:
    """`spec_info` as the type `mode` needs, or an error naming the mode and what was passed."""
    if not isinstance(spec_info, expected):
        raise AttentionBackendError(
            f"{mode.name} needs spec_info of type {expected.__name__}, "
            f"got {type(spec_info).__name__}"
        )
    return spec_info


def is_draft_decode(mode: ForwardMode, spec_info: SpecInput | None) -> bool:
    """A decode batch of a multi-step draft (its KV lengths grow by step + 1)."""
    return mode.is_decode_or_idle() and isinstance(spec_info, DraftDecodeInput)


@dataclass
class ForwardBatch:
    """Everything one forward pass needs; each field says where its tensor lives.

    Lengths follow sglang: `seq_lens[b]` is the KV length of request b *after* this
    forward (prefix plus the tokens this forward appends). For extend modes,
    `extend_seq_lens[b]` tokens are new and `extend_prefix_lens[b]` were cached.
    """

    forward_mode: ForwardMode
    batch_size: int  # host; DP attention may pad it after metadata is built
    input_ids: torch.Tensor  # [num_tokens] int64, device
    req_pool_indices: torch.Tensor  # [bs] int64, device: rows of req_to_token
    seq_lens: torch.Tensor  # [bs] int32, device
    seq_lens_cpu: torch.Tensor  # [bs] int32, host copy of seq_lens
    out_cache_loc: torch.Tensor  # [num_tokens] int64, device: KV slot of each new token
    positions: torch.Tensor  # [num_tokens] int64, device
    req_to_token_pool: ReqToTokenPool
    token_to_kv_pool: TokenToKVPool
    extend_seq_lens: torch.Tensor | None = None  # [bs] int32, device (extend modes)
    extend_prefix_lens: torch.Tensor | None = None  # [bs] int32, device (extend modes)
    extend_start_loc: torch.Tensor | None = None  # [bs] int32, device: first row in input
    extend_seq_lens_cpu: list[int] | None = None  # host copy of extend_seq_lens
    spec_info: SpecInput | None = None
    global_num_tokens_cpu: list[int] | None = None  # per DP rank, filled by DP sync
    real_batch_size: int | None = None  # set when DP padding changed batch_size
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def seq_lens_sum(self) -> int:
        return int(self.seq_lens_cpu.sum().item())

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def device(self) -> torch.device:
        return self.seq_lens.device

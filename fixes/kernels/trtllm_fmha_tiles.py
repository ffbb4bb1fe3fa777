"""Launch configuration of the Triton TRT-LLM FMHA kernels: tile, stage and KV-split choices."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

__all__ = [
    "PACK_MAX_Q_LEN",
    "SHORT_Q",
    "TritonBlockConfig",
    "choose_num_splits",
    "context_launch",
    "decode_launch",
    "pow2_floor",
]

PACK_MAX_Q_LEN = 16  # context windows this short run packed decode-style tiles
SHORT_Q = 2048  # context windows up to this use 64-row query tiles


@dataclass(frozen=True)
class TritonBlockConfig:
    """Tile sizes and launch options; `None` fields are chosen from the device."""

    decode_block_n: int | None = None
    decode_num_warps: int | None = None
    decode_num_stages: int | None = None
    num_kv_splits: int | None = None  # decode: None = chosen from batch and max_seq_len
    context_block_m: int | None = None
    context_block_n: int | None = None
    context_num_warps: int | None = None
    context_num_stages: int | None = None
    context_pack_max_q_len: int | None = None  # None = 16: shorter windows use packed tiles
    context_heads_fastest: bool | None = None  # None = True for windows <= 2048 rows


def choose_num_splits(
    *, programs: int, max_seq_len: int, block_n: int, device: torch.device
) -> int:
    """KV splits so that small batches still fill the GPU (flash-decoding); 1 on CPU."""
    if device.type != "cuda":
        return 1
    index = device.index if device.index is not None else torch.cuda.current_device()
    target_programs = 4 * _sm_count(index)  # ~4 resident programs per SM hide HBM latency
    if programs >= target_programs:
        return 1
    by_occupancy = math.ceil(target_programs / programs)
    by_length = max(1, max_seq_len // (4 * block_n))  # at least 4 tiles per split
    return max(1, min(by_occupancy, by_length, 64))


def decode_launch(
    config: TritonBlockConfig, query: torch.Tensor, *, kv_programs: int, max_seq_len: int
) -> tuple[int, int, int]:
    """(BLOCK_N, num_warps, num_stages): small tiles when interpreted; on GPU with 16-bit
    D <= 128 rows, from an H100 sweep (few programs = KV gets split); else smem-bounded."""
    if not query.is_cuda:
        return config.decode_block_n or 16, config.decode_num_warps or 4, 1
    index = query.device.index if query.device.index is not None else torch.cuda.current_device()
    few_programs = 2 * kv_programs <= 4 * _sm_count(index)
    if max_seq_len <= _SHORT_KV:
        default_block_n, default_stages = (128, 2) if few_programs else (64, 2)
    else:
        default_block_n, default_stages = (32, 4) if few_programs else (64, 3)
    stages = config.decode_num_stages or default_stages
    row_bytes = query.shape[2] * query.element_size()
    if row_bytes > 256 or config.decode_num_stages:  # outside the sweep: K+V tiles fit smem
        fitting = pow2_floor(_SMEM_BUDGET // (2 * stages * row_bytes))
        default_block_n = max(16, min(64, fitting))
    return config.decode_block_n or default_block_n, config.decode_num_warps or 4, stages


def context_launch(
    config: TritonBlockConfig, query: torch.Tensor, *, max_q_len: int
) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for the context kernel: 128-row tiles for
    long windows (8 warps, 184 regs: one program per SM); 64-row tiles and 4 warps up to
    SHORT_Q rows with 2 stages (two independent programs per SM, half the causal
    diagonal per tile). Register counts from an sm_90 compile (bf16, D 128)."""
    if not query.is_cuda:
        return config.context_block_m or 16, config.context_block_n or 16, 4, 1
    row_bytes = query.shape[2] * query.element_size()
    wide = row_bytes <= 256  # bf16/fp16 up to D=128
    short = max_q_len <= SHORT_Q
    block_m = config.context_block_m or (128 if wide and not short else 64)
    # 2 stages for short windows: best of a 26-config H100 sweep at 16x1k and 64x1k
    # (0.534 vs 0.571 ms, 2.105 vs 2.230 ms with 3 stages; see BENCHMARKS.md).
    stages = config.context_num_stages or (3 if wide and not short else 2)
    kv_budget = _SMEM_BUDGET + 32 * 1024 - block_m * row_bytes  # what the Q tile leaves
    fitting = pow2_floor(max(kv_budget, 0) // (2 * stages * row_bytes))
    block_n = config.context_block_n or max(16, min(64, fitting))
    num_warps = config.context_num_warps or (8 if block_m >= 128 else 4)
    return block_m, block_n, num_warps, stages


def pow2_floor(value: int) -> int:
    """The largest power of two <= value (1 for value < 1)."""
    return 1 << max(value, 1).bit_length() - 1


_SMEM_BUDGET = 96 * 1024  # bytes of K/V tiles in flight per program (H100 has 228 KiB/SM)
_SHORT_KV = 2048  # decode KV lengths up to this use 2-stage pipelines (H100 sweep)


@functools.cache
def _sm_count(device_index: int) -> int:
    return int(torch.cuda.get_device_properties(device_index).multi_processor_count)

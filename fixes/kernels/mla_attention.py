"""MLA paged decode attention: a torch reference and flashinfer's BatchMLAPagedAttentionWrapper."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from fixes.errors import KernelContractError

PROVIDERS = ("torch", "flashinfer")
FLASHINFER_WORKSPACE_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class MLAShape:
    """Head layout of an MLA layer: compressed KV width, rope width, query heads, scale."""

    num_heads: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    sm_scale: float


def mla_paged_decode_torch(
    *,
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    kv_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    shape: MLAShape,
    max_kv_len: int,
) -> torch.Tensor:
    """One query token per row `b`, attending to KV slots `kv_indices[kv_indptr[b]:kv_indptr[b+1]]`.

    `q_nope` `[bs, H, kv_lora_rank]`, `q_pe` `[bs, H, rope]`, `kv_cache` holds per slot the
    compressed KV followed by its rope part (`[num_slots, ...]`, page size 1). Returns
    `[bs, H, kv_lora_rank]` in `q_nope`'s dtype; an empty KV range gives 0 (as flashinfer).
    `kv_indices` is read as a kernel reads a pointer: entries past `kv_indptr`'s view are
    taken from the tensor as given, so pass a view that extends as far as the memory
    does. Vectorised, with no host synchronisation on CUDA (capturable); on CPU an index
    outside `kv_indices` or the cache raises IndexError instead of reading unowned memory.
    """
    width = shape.kv_lora_rank + shape.qk_rope_head_dim
    cache = kv_cache.reshape(-1, width)
    starts = kv_indptr[:-1].long()
    lengths = kv_indptr[1:].long() - starts
    offsets = torch.arange(max_kv_len, device=q_nope.device)
    valid = offsets[None, :] < lengths[:, None]
    positions = torch.where(valid, starts[:, None] + offsets[None, :], 0)
    _check_in_range(positions, valid, kv_indices.numel(), what="kv_indices position")
    slots = torch.where(valid, kv_indices[positions.clamp(0, kv_indices.numel() - 1)].long(), 0)
    _check_in_range(slots, valid, cache.shape[0], what="KV slot")
    keys = cache[slots.clamp(0, cache.shape[0] - 1)].float()  # [bs, L, width]
    compressed = keys[..., : shape.kv_lora_rank]
    scores = torch.einsum("bhd,bld->bhl", q_nope.float(), compressed)
    scores = scores + torch.einsum("bhd,bld->bhl", q_pe.float(), keys[..., shape.kv_lora_rank :])
    scores = (scores * shape.sm_scale).masked_fill(~valid[:, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("bhl,bld->bhd", probs, compressed).to(q_nope.dtype)


@dataclass
class FlashInferMLADecode:
    """A flashinfer MLA decode wrapper bound to fixed buffers for exactly `bs` rows.

    `plan()` runs on the host before capture or replay; `run()` is what a graph captures.
    flashinfer copies each plan's inputs into the bound buffers (shapes must match
    exactly, hence one wrapper per batch size). The kernel reads `kv_indices` through
    its bound buffer's pointer, past the slice a step uses, as sglang's backends do.
    """

    shape: MLAShape
    kv_indptr: torch.Tensor  # [bs + 1] int32, bound
    kv_indices: torch.Tensor  # 1-D int32, bound (e.g. a row of the draft buffer)
    bs: int
    workspace: torch.Tensor  # float workspace (uint8), may be shared by wrappers run in turn
    wrapper: Any = field(init=False)
    kv_len: torch.Tensor = field(init=False)
    qo_indptr: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        import flashinfer

        device = self.kv_indptr.device
        self.qo_indptr = torch.arange(self.bs + 1, dtype=torch.int32, device=device)
        self.kv_len = torch.zeros(self.bs, dtype=torch.int32, device=device)
        self.wrapper = flashinfer.mla.BatchMLAPagedAttentionWrapper(
            self.workspace,
            use_cuda_graph=True,
            qo_indptr=self.qo_indptr,
            kv_indptr=self.kv_indptr,
            kv_indices=self.kv_indices,
            kv_len_arr=self.kv_len,
        )

    def plan(self, *, kv_indptr_cpu: torch.Tensor, dtype: torch.dtype) -> None:
        """Plan the rows whose KV ranges `kv_indptr_cpu` (`[bs + 1]`, host) describes.

        flashinfer (use_cuda_graph=True) requires each bound buffer to have exactly the
        shape of the metadata it is given (kv_indices may be longer), so `kv_indptr_cpu`
        must have `bs + 1` entries, like the bound `kv_indptr`.
        """
        import flashinfer

        lengths = (kv_indptr_cpu[1:] - kv_indptr_cpu[:-1]).to(torch.int32)
        metadata = flashinfer.mla.MLAPlanMetadata.csr(
            qo_indptr=torch.arange(self.bs + 1, dtype=torch.int32),
            kv_indptr=kv_indptr_cpu.to(torch.int32).contiguous(),
            kv_indices=self.kv_indices,
            kv_len_arr=lengths,
        )
        self.wrapper.plan(
            metadata=metadata,
            num_heads=self.shape.num_heads,
            head_dim_ckv=self.shape.kv_lora_rank,
            head_dim_kpe=self.shape.qk_rope_head_dim,
            page_size=1,
            causal=False,
            sm_scale=self.shape.sm_scale,
            q_data_type=dtype,
            kv_data_type=dtype,
            query_layout="split",  # run() passes (q_nope, q_pe)
            kv_cache_layout="packed",  # run() passes [slots, page 1, rank + rope]
        )

    def run(
        self, *, q_nope: torch.Tensor, q_pe: torch.Tensor, kv_cache: torch.Tensor
    ) -> torch.Tensor:
        """Attention of the planned batch; `kv_cache` as in `mla_paged_decode_torch`."""
        width = self.shape.kv_lora_rank + self.shape.qk_rope_head_dim
        paged = kv_cache.reshape(-1, 1, width)
        return self.wrapper.run(query=(q_nope, q_pe), kv_cache=paged)


def flashinfer_workspace(device: torch.device) -> torch.Tensor:
    """A float workspace for flashinfer MLA wrappers on `device`."""
    return torch.empty(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=device)


def check_provider(provider: str) -> str:
    """Return `provider` if this module implements it, else raise naming the choices."""
    if provider not in PROVIDERS:
        raise KernelContractError(
            f"MLA decode provider {provider!r} is unknown: expected one of {', '.join(PROVIDERS)}"
        )
    return provider


def _check_in_range(values: torch.Tensor, valid: torch.Tensor, size: int, *, what: str) -> None:
    """On CPU, raise IndexError where a valid entry lies outside [0, size); free on CUDA."""
    if values.device.type != "cpu":
        return
    bad = valid & ((values < 0) | (values >= size))
    if bool(bad.any()):
        first = [int(i) for i in bad.nonzero()[0].tolist()]
        raise IndexError(
            f"MLA decode: {what} {int(values[tuple(first)])} at (row, offset) {tuple(first)} "
            f"outside [0, {size}); the real kernel would read unowned memory"
        )

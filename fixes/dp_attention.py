"""DP attention: sync batch sizes across ranks and pad the batch for the MLP collective."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from fixes.errors import DPAttentionError
from fixes.forward_batch import ForwardBatch

__all__ = ["MLPSyncResult", "prepare_mlp_sync_batch"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MLPSyncResult:
    """What the ranks told each other (host ints, indexed by rank)."""

    num_tokens_per_rank: tuple[int, ...]
    batch_size_per_rank: tuple[int, ...]

    @property
    def max_num_tokens(self) -> int:
        return max(self.num_tokens_per_rank)

    @property
    def max_batch_size(self) -> int:
        return max(self.batch_size_per_rank)


def prepare_mlp_sync_batch(
    forward_batch: ForwardBatch, *, group: torch.distributed.ProcessGroup | None = None
) -> MLPSyncResult:
    """All-gather token counts and batch sizes; pad the batch to the largest rank's.

    Sets `batch_size` to the maximum over ranks, `real_batch_size` to this rank's own,
    and `global_num_tokens_cpu` to the padded token count of every rank (the MLP gather
    size). Call it after `init_forward_metadata`: attention metadata stays built for the
    real batch, and attention must take its batch size from that metadata.
    """
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise DPAttentionError(
            "prepare_mlp_sync_batch needs an initialised torch.distributed process group "
            "(gloo on CPU, nccl on CUDA); call torch.distributed.init_process_group first"
        )
    world_size = dist.get_world_size(group)
    real_batch_size = (
        forward_batch.batch_size
        if forward_batch.real_batch_size is None
        else forward_batch.real_batch_size
    )
    local = torch.tensor(
        [forward_batch.num_tokens, real_batch_size],
        dtype=torch.int64,
        device=_collective_device(group),
    )
    gathered = [torch.zeros_like(local) for _ in range(world_size)]
    dist.all_gather(gathered, local, group=group)
    rows = [tuple(int(x) for x in t.cpu().tolist()) for t in gathered]
    result = MLPSyncResult(
        num_tokens_per_rank=tuple(r[0] for r in rows),
        batch_size_per_rank=tuple(r[1] for r in rows),
    )
    forward_batch.real_batch_size = real_batch_size
    forward_batch.batch_size = result.max_batch_size
    forward_batch.global_num_tokens_cpu = [result.max_num_tokens] * world_size
    logger.debug(
        "DP sync: tokens per rank %s, batch sizes %s; padded batch_size %d -> %d",
        result.num_tokens_per_rank,
        result.batch_size_per_rank,
        real_batch_size,
        result.max_batch_size,
    )
    return result


def _collective_device(group: torch.distributed.ProcessGroup | None) -> torch.device:
    """CPU tensors for gloo; the current CUDA device for nccl."""
    import torch.distributed as dist

    backend = str(dist.get_backend(group))
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")

"""Tests for fixes.dp_attention: batch-size sync across two real gloo processes."""

from __future__ import annotations

import datetime
import re
import socket
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from fixes.dp_attention import MLPSyncResult, prepare_mlp_sync_batch
from fixes.errors import DPAttentionError
from fixes.model.toy_requests import build_stack, random_tokens

PROMPT_LENS_PER_RANK = ([3, 2], [1, 4, 2, 5])


def _rank_worker(rank: int, port: int, results: Any) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        stack = build_stack(device=torch.device("cpu"))
        lens = PROMPT_LENS_PER_RANK[rank]
        requests = stack.new_requests(len(lens))
        batch = stack.extend_batch(requests, random_tokens(lens, vocab_size=97, seed=rank))
        first = prepare_mlp_sync_batch(batch)
        second = prepare_mlp_sync_batch(batch)  # idempotent: real size is kept
        results.put(
            (
                rank,
                first,
                second,
                batch.batch_size,
                batch.real_batch_size,
                batch.global_num_tokens_cpu,
                int(batch.seq_lens.shape[0]),
            )
        )
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_two_gloo_ranks_pad_to_the_larger_batch_and_keep_their_real_size() -> None:
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    port = _free_port()
    workers = [
        context.Process(target=_rank_worker, args=(rank, port, results)) for rank in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0]
    rows = sorted(results.get() for _ in range(2))
    expected_sync = MLPSyncResult(num_tokens_per_rank=(5, 12), batch_size_per_rank=(2, 4))
    assert rows == [
        (0, expected_sync, expected_sync, 4, 2, [12, 12], 2),
        (1, expected_sync, expected_sync, 4, 4, [12, 12], 4),
    ]
    assert (expected_sync.max_batch_size, expected_sync.max_num_tokens) == (4, 12)


def test_without_a_process_group_the_error_says_how_to_start_one() -> None:
    stack = build_stack(device=torch.device("cpu"))
    batch = stack.extend_batch(stack.new_requests(1), [[1, 2]])
    with pytest.raises(
        DPAttentionError,
        match=re.escape(
            "prepare_mlp_sync_batch needs an initialised torch.distributed process group "
            "(gloo on CPU, nccl on CUDA); call torch.distributed.init_process_group first"
        ),
    ):
        prepare_mlp_sync_batch(batch)
    assert (batch.batch_size, batch.real_batch_size) == (1, None)

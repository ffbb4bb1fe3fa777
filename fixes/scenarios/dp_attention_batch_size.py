"""PR #21649: under DP attention the context kernel must take its batch size from metadata."""

from __future__ import annotations

import _thread
import datetime
import socket
import sys
import traceback
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from fixes.attention.trtllm_mha_backend import TRTLLMHAAttnBackend
from fixes.dp_attention import prepare_mlp_sync_batch
from fixes.errors import EngineUsageError
from fixes.model.toy_requests import build_stack, random_tokens
from fixes.scenarios.common import (
    DIST_BACKENDS,
    ScenarioOptions,
    ScenarioOutcome,
    auto_instrumented,
    failure_from_exception,
    run_scenario_main,
)
from fixes.scenarios.trtllm_scenario_support import compare_with_reference, start_scenario
from prtoggle import detect
from prtoggle.revert import toggle

PROMPT_LENS_PER_RANK = ([5, 7], [4, 6, 3, 8])
"""Rank r prefills these requests: rank 0 has the smaller batch and gets padded."""

RANK_TIMEOUT_S = 120

StartMethod = Literal["fork", "spawn"]


@dataclass(frozen=True)
class _RankTask:
    """What a rank needs (picklable for spawn): where to meet, how to run, what to revert."""

    rank: int
    world_size: int
    port: int
    backend: str  # "gloo" or "nccl", resolved by the parent
    options: ScenarioOptions
    reverts: tuple[int, ...]
    start_method: StartMethod


def run(options: ScenarioOptions) -> ScenarioOutcome:
    """Start one process per DP rank (nccl: one GPU each; gloo: CPU collectives, ranks may
    share a GPU), by fork or spawn as `rank_start_method` says; the first failing rank wins."""
    start_scenario(options)
    reverts = toggle.active_reverts()
    world_size = len(PROMPT_LENS_PER_RANK)
    backend = collective_backend(options, world_size=world_size)
    method, why = rank_start_method(options)
    print(f"dp ranks: started by {method} ({why})", file=sys.stderr, flush=True)
    context = mp.get_context("fork") if method == "fork" else mp.get_context("spawn")
    results = context.SimpleQueue()
    port = _free_port()
    workers = [
        context.Process(
            target=_rank_main,
            args=(_RankTask(rank, world_size, port, backend, options, reverts, method), results),
        )
        for rank in range(world_size)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(RANK_TIMEOUT_S)
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
            worker.join()
    outcomes: dict[int, dict[str, Any]] = {}
    while not results.empty():
        rank, outcome = results.get()
        outcomes[rank] = outcome
    return _combine(outcomes, workers, world_size)


def collective_backend(options: ScenarioOptions, *, world_size: int) -> str:
    """gloo or nccl for `options.dist_backend`; nccl needs `--device cuda` and a GPU per rank."""
    if options.dist_backend not in DIST_BACKENDS:
        raise EngineUsageError(
            f"dp_attention_batch_size: --backend {options.dist_backend!r} is unknown; "
            f"choices: {', '.join(DIST_BACKENDS)}"
        )
    gpus = torch.cuda.device_count() if options.device == "cuda" else 0
    if options.dist_backend == "nccl" and gpus < world_size:
        raise EngineUsageError(
            f"dp_attention_batch_size: --backend nccl needs --device cuda and {world_size} GPUs "
            f"(one per DP rank), got --device {options.device} with {gpus}; choices: "
            "--backend gloo, or auto (nccl only when there are enough GPUs)"
        )
    if options.dist_backend == "auto":
        return "nccl" if gpus >= world_size else "gloo"
    return options.dist_backend


def rank_start_method(options: ScenarioOptions) -> tuple[StartMethod, str]:
    """How the ranks start, and why. Fork (no second torch start-up per rank) only on CPU from
    a process with one Python thread; spawn otherwise.

    A forked child keeps only the forking thread: a lock another thread held at the fork (a
    stream's, an import's) stays held forever. `threading.active_count()` misses threads
    started with `_thread`, such as execnet's I/O thread in a pytest-xdist worker; they are
    counted here (`_thread._count()`, and thread states running Python code, which covers
    threads that native code attached to the interpreter). GNU OpenMP's thread pool does not
    survive a fork either (a parallel region in the child after one in the parent waits
    forever), so a forked rank runs torch single-threaded. A CUDA context cannot cross a
    fork at all.
    """
    if options.device != "cpu":
        return "spawn", f"--device {options.device}: a CUDA context cannot cross a fork"
    threads = max(1 + _thread._count(), len(sys._current_frames()))
    if threads > 1:
        return "spawn", (
            f"{threads} Python threads in this process: a forked rank would inherit the "
            "locks they hold"
        )
    return "fork", "one Python thread in this process; each rank runs torch on one thread"


def _rank_main(task: _RankTask, results: Any) -> None:
    """One DP rank: apply the parent's reverts, run, and report its outcome to the parent."""
    try:
        if task.start_method == "fork":
            torch.set_num_threads(1)  # before any torch op: the inherited OpenMP pool is dead
        for pr in task.reverts:
            toggle.apply_revert(pr)
        detect.reset()
        with auto_instrumented():  # --auto-detect reaches the spawned ranks too
            outcome = _rank_forward(task)
    except Exception as exc:  # reported to the parent, never hidden
        traceback.print_exc()
        outcome = failure_from_exception(exc)
    results.put((task.rank, asdict(outcome)))


def _rank_forward(task: _RankTask) -> ScenarioOutcome:
    """Prefill this rank's batch, sync batch sizes across ranks, run attention, compare."""
    rank, options = task.rank, task.options
    device = torch.device(options.device)
    if device.type == "cuda":  # nccl: rank r owns GPU r; gloo: ranks may share GPUs
        torch.cuda.set_device(rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    print(
        f"dp_rank[{rank}]: {task.backend} process group, device {device}",
        file=sys.stderr,
        flush=True,
    )
    dist.init_process_group(
        task.backend,
        init_method=f"tcp://127.0.0.1:{task.port}",
        rank=rank,
        world_size=task.world_size,
        timeout=datetime.timedelta(seconds=RANK_TIMEOUT_S // 2),
    )
    try:
        detect.prepare_device(device)
        stack = build_stack(device=device)
        prompt_lens = PROMPT_LENS_PER_RANK[rank]
        requests = stack.new_requests(len(prompt_lens))
        tokens = random_tokens(
            prompt_lens, vocab_size=stack.model.config.vocab_size, seed=31 + rank
        )
        backend = TRTLLMHAAttnBackend(
            req_to_token_pool=stack.req_to_token_pool,
            token_to_kv_pool=stack.token_to_kv_pool,
            provider=options.provider,
        )
        batch = stack.extend_batch(requests, tokens)
        backend.init_forward_metadata(batch)  # built for the real batch
        sync = prepare_mlp_sync_batch(batch)  # pads batch.batch_size for the MLP gather
        hidden = stack.model.forward(batch, backend)
        detect.check()
    finally:
        dist.destroy_process_group()
    reference = torch.cat([stack.model.reference(torch.tensor(t, device=device)) for t in tokens])
    mismatch = compare_with_reference(hidden, reference, site=f"dp_rank[{rank}].extend.output")
    if mismatch is not None:
        return mismatch
    return ScenarioOutcome(
        outcome="clean",
        message=f"rank {rank}: batch {len(prompt_lens)} padded to {sync.max_batch_size} "
        f"(batch sizes per rank {list(sync.batch_size_per_rank)}); matches the reference",
    )


def _combine(
    outcomes: dict[int, dict[str, Any]], workers: list[Any], world_size: int
) -> ScenarioOutcome:
    """The first failing rank's outcome; a rank that reported nothing is a failure too."""
    for rank in range(world_size):
        reported = outcomes.get(rank)
        if reported is None:
            return ScenarioOutcome(
                outcome="failure",
                error="RankDied",
                site=f"dp_rank[{rank}]",
                message=f"rank {rank} reported nothing (exit code {workers[rank].exitcode})",
            )
        if reported["outcome"] != "clean":
            return ScenarioOutcome(**reported)
    return ScenarioOutcome(
        outcome="clean", message="; ".join(outcomes[r]["message"] for r in range(world_size))
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    run_scenario_main(run, description=__doc__ or "", multi_rank=True)

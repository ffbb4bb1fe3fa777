"""Tests for the #21649 scenario: two DP ranks (gloo on CPU, nccl on two GPUs), the smaller
batch padded after metadata."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
from scenario_process import (
    REPO_ROOT,
    assert_matches_expect,
    detection_on,
    failure_line,
    isolate_detection,
    run_child,
    run_module,
)

import prtoggle
from fixes.errors import EngineUsageError
from fixes.scenarios import dp_attention_batch_size as scenario
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome
from prtoggle.commands.repro import scenario_env
from prtoggle.runners.warm_client import HEAVY_MODULES, WarmWorker

MODULE = "fixes.scenarios.dp_attention_batch_size"
FORKED = (
    "dp ranks: started by fork (one Python thread in this process; each rank runs torch on "
    "one thread)"
)
HANG_TIMEOUT_S = 90
"""Well under RANK_TIMEOUT_S (120): a rank that hangs fails the test instead of being reaped."""

IN_PROCESS = """
import _thread, sys, threading
import torch
from fixes.scenarios import dp_attention_batch_size as scenario
from fixes.scenarios.common import ScenarioOptions
torch.set_num_threads(2)  # an OpenMP parallel region below, even on a one-core machine
x = torch.randn(4_000_000)
assert float(x.exp().sum()) > 0
if sys.argv[1] == "with-thread":  # like execnet's I/O thread in a pytest-xdist worker
    started, held = threading.Lock(), threading.Lock()
    started.acquire()
    held.acquire()
    _thread.start_new_thread(lambda: (started.release(), held.acquire()), ())
    started.acquire()  # the thread runs, holding nothing we need, blocked on `held`
print(scenario.run(ScenarioOptions()).outcome)
"""
"""Run the scenario in a process that has run OpenMP work, with or without a second thread
that `threading.active_count()` does not see."""


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_detection(monkeypatch)


def test_fixed_ranks_are_clean_with_every_probe_on(monkeypatch: pytest.MonkeyPatch) -> None:
    detection_on(monkeypatch)
    assert scenario.run(ScenarioOptions()) == ScenarioOutcome(
        outcome="clean",
        message="rank 0: batch 2 padded to 4 (batch sizes per rank [2, 4]); matches the "
        "reference; rank 1: batch 4 padded to 4 (batch sizes per rank [2, 4]); matches the "
        "reference",
    )


def test_reverted_in_parent_reaches_the_ranks_and_names_the_batch_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_SPEC_OOB_DETECTION", "1")
    with prtoggle.reverted(21649):
        outcome = scenario.run(ScenarioOptions())
    assert (outcome.outcome, outcome.error) == ("failure", "OOBDetected")
    assert outcome.message == (
        "1 site hit: oob at trtllm_mha.forward_extend.batch_size: 1 element, value 4 outside "
        "[0, 3), first hit in phase eager at step 0, lowest flat index 0"
    )


def test_reverted_process_fails_as_the_yaml_expects() -> None:
    reverted = run_module(MODULE, revert=21649)
    assert reverted.returncode == 1, reverted.stderr[-2000:]
    assert_matches_expect(21649, reverted.stderr)


@pytest.mark.gpu
def test_on_cuda_reverted_batch_size_is_named_and_fixed_is_clean() -> None:
    args = ("--device", "cuda")
    reverted = run_module(MODULE, revert=21649, extra_args=args)
    assert reverted.returncode == 1, reverted.stderr[-3000:]
    assert_matches_expect(21649, reverted.stderr)
    fixed = run_module(MODULE, revert=None, extra_args=args)
    assert fixed.returncode == 0, fixed.stderr[-3000:]


def test_auto_backend_is_gloo_without_a_gpu_per_rank() -> None:
    assert scenario.collective_backend(ScenarioOptions(), world_size=2) == "gloo"
    assert scenario.collective_backend(ScenarioOptions(dist_backend="gloo"), world_size=2) == (
        "gloo"
    )


def test_nccl_without_a_gpu_per_rank_is_refused_with_the_choices() -> None:
    with pytest.raises(EngineUsageError) as caught:
        scenario.collective_backend(ScenarioOptions(dist_backend="nccl"), world_size=2)
    assert str(caught.value) == (
        "dp_attention_batch_size: --backend nccl needs --device cuda and 2 GPUs (one per DP "
        "rank), got --device cpu with 0; choices: --backend gloo, or auto (nccl only when "
        "there are enough GPUs)"
    )


def test_the_process_reports_which_backend_each_rank_used() -> None:
    fixed = run_module(MODULE, revert=None, extra_args=("--backend", "gloo"))
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert "dp_rank[0]: gloo process group, device cpu" in fixed.stderr
    assert "dp_rank[1]: gloo process group, device cpu" in fixed.stderr


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs (one per DP rank)")
def test_on_two_gpus_the_ranks_meet_over_nccl_and_the_batch_size_is_named() -> None:
    args = ("--device", "cuda", "--backend", "nccl")
    reverted = run_module(MODULE, revert=21649, extra_args=args)
    assert reverted.returncode == 1, reverted.stderr[-3000:]
    assert_matches_expect(21649, reverted.stderr)
    for rank in (0, 1):
        assert f"dp_rank[{rank}]: nccl process group, device cuda:{rank}" in reverted.stderr
    fixed = run_module(MODULE, revert=None, extra_args=args)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert "dp_rank[1]: nccl process group, device cuda:1" in fixed.stderr


def test_ranks_fork_after_openmp_work_in_a_single_threaded_process_and_finish() -> None:
    ran = _run_in_process("single-thread")
    assert (ran.returncode, ran.stdout) == (0, "clean\n"), ran.stderr[-3000:]
    assert FORKED in ran.stderr.splitlines()


def test_ranks_spawn_from_a_process_holding_a_low_level_thread_and_finish() -> None:
    ran = _run_in_process("with-thread")
    assert (ran.returncode, ran.stdout) == (0, "clean\n"), ran.stderr[-3000:]
    assert (
        "dp ranks: started by spawn (2 Python threads in this process: a forked rank would "
        "inherit the locks they hold)"
    ) in ran.stderr.splitlines()


def test_cuda_ranks_always_spawn() -> None:
    assert scenario.rank_start_method(ScenarioOptions(device="cuda")) == (
        "spawn",
        "--device cuda: a CUDA context cannot cross a fork",
    )


def test_through_the_warm_worker_the_ranks_fork_and_reproduce_like_a_fresh_process() -> None:
    base = {k: v for k, v in os.environ.items() if k != "SGLANG_DEBUG_REVERT_PR"}
    argv = [sys.executable, "-m", MODULE]
    preload = (*HEAVY_MODULES, "fixes.attention.trtllm_mha_backend")  # as `repro` preloads
    with WarmWorker(preload=preload, base_env=base) as worker:
        fixed = worker.run(argv, env=scenario_env((), base=base), timeout=HANG_TIMEOUT_S)
        reverted = worker.run(argv, env=scenario_env((21649,), base=base), timeout=HANG_TIMEOUT_S)
        assert worker.warm_runs == 2
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert reverted.returncode == 1, reverted.stderr[-3000:]
    assert_matches_expect(21649, reverted.stderr)
    for run in (fixed, reverted):
        assert FORKED in run.stderr.splitlines()


def test_auto_detect_in_forked_ranks_wraps_each_engine_function_once() -> None:
    result = run_child(MODULE, {"SGLANG_DEBUG_REVERT_PR": "21649"}, "--auto-detect")
    assert result.returncode == 1, result.stderr[-3000:]
    assert FORKED in result.stderr.splitlines()
    buffer = "aten.cat.default in fixes.attention.trtllm_mha_metadata.cumsum_with_zero"
    assert failure_line(result.stderr) == (
        f"RedzoneRead at {buffer}: 1 site hit: redzone of buffer {buffer}: 4 bytes read by "
        "trtllm context kernel: cum_seq_lens_q[3], first at byte 0 past its end (12-byte buffer "
        "on cpu)"
    )  # the 2-request rank's context kernel runs over the DP-padded batch of 4
    through_model = "raised through instrumented fixes.model.toy_attention_model.ToyAttentionModel"
    assert result.stderr.count(through_model + ".forward\n") == 1


def _run_in_process(mode: str) -> subprocess.CompletedProcess[str]:
    """IN_PROCESS in a fresh interpreter (own process group, its ranks included); a hang is
    killed with the whole group at HANG_TIMEOUT_S and fails the test."""
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_DEBUG_REVERT_PR"}
    argv = [sys.executable, "-c", textwrap.dedent(IN_PROCESS), mode]
    with subprocess.Popen(
        argv,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=HANG_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            pytest.fail(f"{mode}: the scenario did not finish within {HANG_TIMEOUT_S} s (hung)")
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)

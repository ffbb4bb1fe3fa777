"""Tests of fixes.scenarios.common's --auto-detect: no hand-placed probe, the fault found by
instrumenting the engine."""

from __future__ import annotations

import os
import subprocess
import sys

from scenario_process import SCENARIO_TIMEOUT_S, failure_line, run_child

from fixes.scenarios.common import CPU_THREADS


def test_auto_detect_names_the_capture_nan_of_26521_without_hand_probes() -> None:
    result = run_child(
        "fixes.scenarios.trtllm_draft_decode_capture",
        {"SGLANG_DEBUG_REVERT_PR": "26521"},
        "--auto-detect",
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert failure_line(result.stderr).startswith(
        "NaNDetected at fixes.attention.trtllm_mha_backend.TRTLLMHAAttnBackend._run_decode_kernel"
        "(return): 14 sites hit, in first-hit order: nan at fixes.attention.trtllm_mha_backend"
        ".TRTLLMHAAttnBackend._run_decode_kernel(return): 4608 elements in rows 0..3, first hit "
        "in phase capture-warmup at step 0"
    )


def test_auto_detect_fixed_run_is_clean() -> None:
    result = run_child("fixes.scenarios.trtllm_draft_decode_capture", {}, "--auto-detect")
    assert result.returncode == 0, result.stderr[-2000:]


THREADS_REPORTER = """
import torch
from fixes.scenarios.common import ScenarioOutcome, run_scenario_main
run_scenario_main(
    lambda options: ScenarioOutcome(outcome="clean", message=str(torch.get_num_threads())),
    description="reports its torch threads",
)
"""


def test_a_scenario_process_on_cpu_runs_torch_on_cpu_threads() -> None:
    result = _python_c(THREADS_REPORTER, "--device", "cpu")
    assert (result.returncode, result.stdout) == (0, f"clean: {CPU_THREADS}\n"), result.stderr
    assert _python_c("import torch; print(torch.get_num_threads())").stdout != f"{CPU_THREADS}\n"


def _python_c(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}  # a default above CPU_THREADS on any machine
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_S,
        check=False,
    )

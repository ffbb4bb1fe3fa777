"""Tests of fixes.scenarios.common's --auto-detect: no hand-placed probe; what instrumenting
the engine (NaN probes on every function, poisoned graph buffers, a redzone after every
tensor torch allocates, the reference kernels' reads checked against redzones) finds in
each reverted fix, and that every fixed run stays clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest
from scenario_process import SCENARIO_TIMEOUT_S, isolate_detection, run_child

import prtoggle
from fixes.scenarios import (
    eagle_hidden_states_pool,
    mla_draft_kv_indices_width,
    trtllm_draft_decode_capture,
    trtllm_draft_extend_routing,
)
from fixes.scenarios.common import (
    AUTO_DETECT_ENV,
    CPU_THREADS,
    OUTCOME_PREFIX,
    ScenarioOptions,
    ScenarioOutcome,
    failure_from_exception,
    run_auto_detect,
)

Scenario = Callable[[ScenarioOptions], ScenarioOutcome]
SCENARIOS: dict[int, Scenario] = {
    26521: trtllm_draft_decode_capture.run,
    24856: trtllm_draft_extend_routing.run,
    27460: mla_draft_kv_indices_width.run,
    22832: eagle_hidden_states_pool.run,
}
FORWARD_EXTEND = "fixes.attention.trtllm_mha_backend.TRTLLMHAAttnBackend.forward_extend"


def auto_detect(monkeypatch: pytest.MonkeyPatch, pr: int, *, reverted: bool) -> ScenarioOutcome:
    """The in-process equivalent of `[SGLANG_DEBUG_REVERT_PR=pr] python -m ... --auto-detect`."""
    isolate_detection(monkeypatch)
    for name, value in AUTO_DETECT_ENV.items():
        monkeypatch.setenv(name, value)  # restored after the test
    try:
        if not reverted:
            return run_auto_detect(SCENARIOS[pr], ScenarioOptions())
        with prtoggle.reverted(pr):
            return run_auto_detect(SCENARIOS[pr], ScenarioOptions())
    except Exception as exc:  # the scenario's failure, as run_scenario_main reports it
        return failure_from_exception(exc)


def test_26521_capture_nan_is_found_at_its_first_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = auto_detect(monkeypatch, 26521, reverted=True)
    assert (outcome.error, outcome.site) == (
        "NaNDetected",
        "fixes.attention.trtllm_mha_backend.TRTLLMHAAttnBackend._run_decode_kernel(return)",
    )
    assert outcome.message.startswith(
        "14 sites hit, in first-hit order: nan at fixes.attention.trtllm_mha_backend"
        ".TRTLLMHAAttnBackend._run_decode_kernel(return): 4608 elements in rows 0..3, first hit "
        "in phase capture-warmup at step 0"
    )


def test_24856_decode_kernel_reading_query_rows_past_the_end_is_found_by_the_read_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The decode kernel is given 16 query rows (4 per request) of a 10-row extend batch: its
    # first load past the end reads the query's redzone (before it writes rows 10..15 of the
    # 10-row output, which the output's redzone would catch next).
    outcome = auto_detect(monkeypatch, 24856, reverted=True)
    site = "aten.mm.default in fixes.model.toy_attention_model.ToyAttentionModel.forward"
    assert outcome == ScenarioOutcome(
        outcome="failure",
        error="RedzoneRead",
        site=site,
        message=f"1 site hit: redzone of buffer {site}: 256 bytes read by trtllm decode kernel: "
        "query[10], first at byte 0 past its end (2560-byte buffer on cpu)",
    )


def test_27460_kv_indices_overflow_is_found_by_the_graph_buffer_redzone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcome = auto_detect(monkeypatch, 27460, reverted=True)
    assert outcome == ScenarioOutcome(
        outcome="failure",
        error="RedzoneViolation",
        site="flashinfer_mla.cuda_graph_kv_indices",
        message="1 site hit: redzone of buffer flashinfer_mla.cuda_graph_kv_indices: 40 bytes "
        "overwritten, first at byte 0 past its end (512-byte buffer on cpu)",
    )


def test_22832_stale_index_read_is_found_by_the_read_check_on_the_graph_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The kernel reads 4 pool rows from the 2-entry graph buffer of a smaller captured batch:
    # the last 2 lie in its redzone (without the read check they fault as a pool row outside
    # [0, 8) before anything is written).
    outcome = auto_detect(monkeypatch, 22832, reverted=True)
    assert outcome == ScenarioOutcome(
        outcome="failure",
        error="RedzoneRead",
        site="draft_extend_graph[step=2].req_pool_indices",
        message="1 site hit: redzone of buffer draft_extend_graph[step=2].req_pool_indices: "
        "16 bytes read by assign_hidden_states_pool: req_pool_indices[:4], first at byte 0 past "
        "its end (16-byte buffer on cpu)",
    )


@pytest.mark.parametrize("pr", sorted(SCENARIOS))
def test_fixed_run_is_clean_under_auto_detect(monkeypatch: pytest.MonkeyPatch, pr: int) -> None:
    outcome = auto_detect(monkeypatch, pr, reverted=False)
    assert (outcome.outcome, outcome.error) == ("clean", None), outcome.message


def test_21649_fixed_run_is_clean_under_auto_detect() -> None:
    # Reverted (a read of cu_seq_lens_q's redzone): test_dp_attention_batch_size's
    # test_auto_detect_in_forked_ranks_wraps_each_engine_function_once asserts that line.
    fixed = run_child("fixes.scenarios.dp_attention_batch_size", {}, "--auto-detect")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    outcome = json.loads(fixed.stderr.rstrip().splitlines()[-1].removeprefix(OUTCOME_PREFIX))
    assert (outcome["outcome"], outcome["error"]) == ("clean", None)


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

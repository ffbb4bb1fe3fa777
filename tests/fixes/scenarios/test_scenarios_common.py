"""Tests of fixes.scenarios.common's --auto-detect: no hand-placed probe, the fault found by
instrumenting the engine."""

from __future__ import annotations

from scenario_process import failure_line, run_child


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

"""Scenario #27460: clean when fixed; reverted, the narrow graph rows are named or crash."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest
from scenario_process import (
    DETECTION_VARIABLES,
    clear_detection_env,
    detection_on,
    run_child,
    run_reverted,
)

from fixes.errors import EngineUsageError
from fixes.scenarios.common import OUTCOME_PREFIX, ScenarioOptions, ScenarioOutcome
from fixes.scenarios.mla_draft_kv_indices_width import run
from prtoggle import detect
from prtoggle.recipes.registry import default_registry

PR = 27460
MODULE = "fixes.scenarios.mla_draft_kv_indices_width"


@pytest.fixture(autouse=True)
def no_detection(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    clear_detection_env(monkeypatch)
    yield
    detect.reset()


def test_fixed_run_is_clean_and_matches_eager() -> None:
    assert run(ScenarioOptions()) == ScenarioOutcome(
        outcome="clean",
        message="graph replay matches eager for 3 draft steps, topk 2, seq_lens (7, 6) (torch)",
    )


def test_fixed_run_is_clean_with_every_detector_on(monkeypatch: pytest.MonkeyPatch) -> None:
    detection_on(monkeypatch)
    assert run(ScenarioOptions()).outcome == "clean"


def test_reverted_without_detection_fails_writing_past_the_buffer() -> None:
    outcome = run_reverted(run, PR)
    assert outcome.error == "IndexError"
    assert outcome.message == (
        "generate_draft_decode_kv_indices: step 3 writes kv_indices entries up to flat offset "
        "138, but the allocation holds 128 entries (row width 32); the real kernel would "
        "write unowned memory"
    )


def test_reverted_with_detection_names_the_first_overflowing_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    detection_on(monkeypatch)
    outcome = run_reverted(run, PR)
    assert (outcome.error, outcome.site) == (
        "OOBDetected",
        "flashinfer_mla.draft_kv_indices[step=1].row_width",
    )
    assert "value 34 outside [0, 33)" in outcome.message


def test_reverted_with_poisoning_only_reports_the_redzone_overwrite(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_DEBUG_POISON", "1")
    outcome = run_reverted(run, PR)
    assert outcome.error == "RedzoneViolation"
    assert "redzone of buffer flashinfer_mla.cuda_graph_kv_indices: 40 bytes overwritten" in (
        outcome.message
    )


def test_reverted_spill_into_the_next_row_gives_wrong_attention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_DEBUG_POISON", "1")
    monkeypatch.setenv("PRTOGGLE_DETECT_MODE", "record")  # let the run reach the comparison
    outcome = run_reverted(run, PR)
    assert (outcome.error, outcome.site) == (
        "MismatchWithReference",
        "flashinfer_mla.draft_decode[step=1].output",
    )


def child(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_child(MODULE, env, *args)


def test_reverted_child_exits_1_with_the_yaml_expect() -> None:
    result = child({"SGLANG_DEBUG_REVERT_PR": str(PR), **dict.fromkeys(DETECTION_VARIABLES, "1")})
    assert result.returncode == 1
    expect = default_registry().get(PR, collection="fixes").expect
    assert expect is not None
    assert re.search(expect, result.stderr), result.stderr[-2000:]
    assert result.stderr.splitlines()[-1].startswith(OUTCOME_PREFIX)


@pytest.mark.gpu
@pytest.mark.parametrize("provider", ["triton", "flashinfer"])
def test_on_cuda_fixed_is_clean_and_reverted_matches_the_expect(provider: str) -> None:
    fixed = child({}, "--device", "cuda", "--provider", provider)
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    reverted = child(
        {"SGLANG_DEBUG_REVERT_PR": str(PR), **dict.fromkeys(DETECTION_VARIABLES, "1")},
        "--device",
        "cuda",
        "--provider",
        provider,
    )
    assert reverted.returncode == 1
    expect = default_registry().get(PR, collection="fixes").expect
    assert expect is not None
    assert re.search(expect, reverted.stderr), reverted.stderr[-2000:]


@pytest.mark.gpu
def test_on_cuda_reverted_without_detection_fails() -> None:
    result = child({"SGLANG_DEBUG_REVERT_PR": str(PR)}, "--device", "cuda")
    assert result.returncode != 0, result.stderr[-2000:]


def test_flashinfer_provider_on_cpu_is_refused_with_the_choices() -> None:
    with pytest.raises(EngineUsageError) as info:
        run(ScenarioOptions(provider="flashinfer"))
    assert str(info.value) == (
        "mla_draft_kv_indices_width: --provider flashinfer needs --device cuda, got cpu; on "
        "CPU use torch or triton (TRITON_INTERPRET=1)"
    )

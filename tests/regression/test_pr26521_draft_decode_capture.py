"""Regression test for PR #26521: draft decode copies seq_lens during CUDA graph capture."""

from __future__ import annotations

import pytest
from scenario_check import run_clean

from fixes.scenarios import trtllm_draft_decode_capture as scenario


@pytest.mark.guards_pr(26521)  # expect: the fix's own, from yaml/fixes/26521.yaml
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_draft_decode_capture_scenario_is_clean_and_matches_the_reference(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome = run_clean(scenario.run, device=device, monkeypatch=monkeypatch)
    assert outcome.outcome == "clean", outcome

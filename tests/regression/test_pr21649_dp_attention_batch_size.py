"""Regression test for PR #21649: DP attention takes batch size from metadata."""

from __future__ import annotations

import pytest
from scenario_check import run_clean

from fixes.scenarios import dp_attention_batch_size as scenario


@pytest.mark.guards_pr(21649)  # expect: the fix's own, from yaml/fixes/21649.yaml
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_dp_attention_batch_size_scenario_is_clean_and_matches_the_reference(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome = run_clean(scenario.run, device=device, monkeypatch=monkeypatch)
    assert outcome.outcome == "clean", outcome

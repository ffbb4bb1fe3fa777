"""Regression test for PR #24856: draft extend goes to the context kernel."""

from __future__ import annotations

import pytest
from scenario_check import run_clean

from fixes.scenarios import trtllm_draft_extend_routing as scenario


@pytest.mark.guards_pr(24856)  # expect: the fix's own, from yaml/fixes/24856.yaml
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_draft_extend_routing_scenario_is_clean_and_matches_the_reference(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome = run_clean(scenario.run, device=device, monkeypatch=monkeypatch)
    assert outcome.outcome == "clean", outcome

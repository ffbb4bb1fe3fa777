"""Regression test for PR #22832: hidden states come from graph buffers only if the graph ran."""

from __future__ import annotations

import pytest
from scenario_check import run_clean

from fixes.scenarios import eagle_hidden_states_pool as scenario


@pytest.mark.guards_pr(22832)  # expect: the fix's own, from yaml/fixes/22832.yaml
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_eagle_hidden_states_pool_scenario_is_clean_and_matches_the_reference(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome = run_clean(scenario.run, device=device, monkeypatch=monkeypatch)
    assert outcome.outcome == "clean", outcome

"""Regression test for PR #27460: MLA draft graph kv_indices rows fit topk > 1."""

from __future__ import annotations

import pytest
from scenario_check import run_clean

from fixes.scenarios import mla_draft_kv_indices_width as scenario


@pytest.mark.guards_pr(27460)  # expect: the fix's own, from yaml/fixes/27460.yaml
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_mla_draft_kv_indices_width_scenario_is_clean_and_matches_the_reference(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome = run_clean(scenario.run, device=device, monkeypatch=monkeypatch)
    assert outcome.outcome == "clean", outcome

"""Shared test setup for the fix-cost benchmarks: no revert or probe from the environment."""

from __future__ import annotations

import dataclasses

import pytest

from fixes.benchmarks.common import BenchOptions, BenchResult

QUICK = BenchOptions(device="cpu", repeat=2, warmup=0)
"""Two samples, no warm-up: enough to check the result's form, not its speed."""

ENV_NAMES = (
    "SGLANG_DEBUG_REVERT_PR",
    "SGLANG_SPEC_NAN_DETECTION",
    "SGLANG_SPEC_OOB_DETECTION",
    "SGLANG_DEBUG_POISON",
)


def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def assert_well_formed(result: BenchResult, *, name: str, reverted: list[int]) -> None:
    assert result.name == name
    assert result.unit == "ms"
    assert len(result.samples) == QUICK.repeat
    assert all(sample > 0 for sample in result.samples)
    assert min(result.samples) <= result.median <= max(result.samples)
    assert result.calls_per_sample >= 1
    assert result.in_force == reverted


def paired(pr: int) -> BenchOptions:
    """QUICK, with each sample paired with one taken with `pr` reverted."""
    return dataclasses.replace(QUICK, pr=pr)


def assert_paired(result: BenchResult, *, name: str, pr: int) -> None:
    """Fixed samples with nothing reverted, each paired with one taken with `pr` in force."""
    assert_well_formed(result, name=name, reverted=[])
    assert result.reverted is not None
    assert (result.reverted.pr, result.reverted.in_force, result.reverted.error) == (pr, [pr], None)
    assert len(result.reverted.samples) == len(result.samples)
    assert all(sample > 0 for sample in result.reverted.samples)

"""Tests of prtoggle.detect.probes.witness: row assignment, table allocation, clearing."""

from __future__ import annotations

import pytest
import torch

from prtoggle.detect.probes import witness
from prtoggle.errors import DetectUsageError


def test_rows_are_assigned_in_first_seen_order_per_kind_and_site() -> None:
    registry = witness.WitnessRegistry()
    assert registry.slot_for("nan", "a") == 0
    assert registry.slot_for("inf", "a") == 1
    assert registry.slot_for("nan", "b") == 2
    assert registry.slot_for("nan", "a") == 0
    assert registry.site_names() == {0: ("nan", "a"), 1: ("inf", "a"), 2: ("nan", "b")}


def test_full_table_refuses_a_new_site_and_says_why() -> None:
    registry = witness.WitnessRegistry(max_sites=2)
    registry.slot_for("nan", "a")
    registry.slot_for("nan", "b")
    with pytest.raises(DetectUsageError) as excinfo:
        registry.slot_for("oob", "c")
    assert str(excinfo.value) == (
        "witness table full: 2 (kind, site) rows in use, cannot add oob probe site 'c'; "
        "use fewer distinct site names (put varying values such as batch sizes in the "
        "message, not the name)"
    )
    assert registry.slot_for("nan", "b") == 1


@pytest.mark.parametrize("site", ["", "   ", None, 3])
def test_a_site_must_be_a_non_empty_string(site: object) -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        witness.WitnessRegistry().slot_for("nan", site)  # type: ignore[arg-type]
    assert str(excinfo.value) == (
        "probe site must be a non-empty string naming where and when, "
        f"e.g. 'trtllm_mha.draft_decode[step=0].output'; got {site!r}"
    )


def test_unknown_kind_lists_the_kinds() -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        witness.WitnessRegistry().slot_for("denormal", "a")
    assert str(excinfo.value) == "unknown probe kind 'denormal': expected one of nan, inf, oob"


def test_a_table_is_allocated_once_per_device_with_unhit_rows() -> None:
    registry = witness.WitnessRegistry(max_sites=3)
    table = registry.table_for(torch.device("cpu"), when=42)
    assert registry.table_for(torch.device("cpu"), when=0) is table
    assert table.rows.tolist() == [list(witness.EMPTY_ROW)] * 3
    assert table.rows.dtype == torch.int64
    assert table.when.tolist() == [42]


def test_a_cuda_table_is_not_allocated_during_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(witness, "is_capturing", lambda: True)
    registry = witness.WitnessRegistry()
    with pytest.raises(DetectUsageError) as excinfo:
        registry.table_for(torch.device("cuda:0"), when=0)
    assert str(excinfo.value) == (
        "the witness table for cuda:0 would be allocated during CUDA graph capture: run one "
        "probe on cuda:0 (or call prepare_device('cuda:0')) before capture, e.g. during the "
        "warm-up runs"
    )
    assert registry.tables == {}


def test_clear_resets_rows_in_place_and_keeps_assignments() -> None:
    registry = witness.WitnessRegistry(max_sites=2)
    slot = registry.slot_for("oob", "a")
    table = registry.table_for(torch.device("cpu"), when=0)
    rows_before = table.rows
    table.rows[slot, witness.COL_COUNT] = 5
    registry.clear()
    assert table.rows is rows_before
    assert table.rows.tolist() == [list(witness.EMPTY_ROW)] * 2
    assert registry.slot_for("oob", "a") == slot


def test_clear_frees_a_claim_lock_left_taken_by_a_launch_that_never_finished() -> None:
    registry = witness.WitnessRegistry(max_sites=2)
    table = registry.table_for(torch.device("cpu"), when=0)
    table.claim_locks[1] = 1
    table.sequence.fill_(4)
    registry.clear()
    assert table.claim_locks.tolist() == [0, 0]
    assert table.sequence.tolist() == [0]


def test_clear_is_refused_during_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = witness.WitnessRegistry(max_sites=1)
    registry.table_for(torch.device("cpu"), when=0)
    monkeypatch.setattr(witness, "is_capturing", lambda: True)
    with pytest.raises(DetectUsageError) as excinfo:
        registry.clear()
    assert str(excinfo.value) == "reset() called during CUDA graph capture: call it outside"

"""Tests of prtoggle.detect.probes.clock: phase and step on the host and in the device scalar."""

from __future__ import annotations

import pytest
import torch

from prtoggle.detect.probes import clock, witness
from prtoggle.errors import DetectUsageError


def test_phase_starts_eager_at_step_zero() -> None:
    assert (clock.current_phase(), clock.current_step()) == ("eager", 0)


def test_nested_phases_restore_the_previous_phase_on_exit() -> None:
    with clock.phase("capture-warmup"):
        with clock.phase("capture"):
            assert clock.current_phase() == "capture"
        assert clock.current_phase() == "capture-warmup"
    assert clock.current_phase() == "eager"


def test_phase_is_restored_when_the_body_raises() -> None:
    with pytest.raises(RuntimeError), clock.phase("replay"):
        raise RuntimeError("boom")
    assert clock.current_phase() == "eager"


def test_unknown_phase_lists_the_phases() -> None:
    with pytest.raises(DetectUsageError) as excinfo, clock.phase("warmup"):
        pass
    assert str(excinfo.value) == (
        "unknown detection phase 'warmup': expected one of eager, capture-warmup, capture, replay"
    )


@pytest.mark.parametrize("step", [-1, 2**31, 1.5, True, "3"])
def test_set_step_rejects_anything_but_a_small_non_negative_int(step: object) -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        clock.set_step(step)  # type: ignore[arg-type]
    assert str(excinfo.value) == (
        f"set_step(): step must be an int in [0, 2147483647], got {step!r}"
    )


def test_packed_when_round_trips_every_phase() -> None:
    for name in clock.PHASES:
        assert clock.unpack_when(clock.pack_when(name, 12345)) == (name, 12345)
    assert clock.unpack_when(witness.UNHIT_WHEN) == ("?", -1)


def test_phase_and_step_changes_are_written_into_the_device_scalar() -> None:
    table = witness.witness_tables().table_for(torch.device("cpu"), when=clock.current_when())
    clock.set_step(7)
    with clock.phase("replay"):
        assert table.when.item() == clock.pack_when("replay", 7)
    assert table.when.item() == clock.pack_when("eager", 7)


def test_device_write_is_deferred_while_capturing_and_flushed_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = witness.witness_tables().table_for(torch.device("cpu"), when=clock.current_when())
    monkeypatch.setattr(witness, "is_capturing", lambda: True)
    clock.set_step(3)
    assert table.when.item() == clock.pack_when("eager", 0)
    assert witness.witness_tables().stamp_pending
    monkeypatch.setattr(witness, "is_capturing", lambda: False)
    clock.sync_device_clock()
    assert table.when.item() == clock.pack_when("eager", 3)
    assert not witness.witness_tables().stamp_pending

"""Tests of prtoggle.detect.config: env gating and the reporting mode."""

from __future__ import annotations

import pytest

from prtoggle.detect import config
from prtoggle.errors import DetectUsageError


def test_every_gate_is_off_when_its_variable_is_unset() -> None:
    assert not config.nan_detection_enabled()
    assert not config.oob_detection_enabled()
    assert not config.poison_enabled()


@pytest.mark.parametrize("value", ["1", "true", "TRUE", " yes ", "on"])
def test_true_spellings_turn_a_gate_on(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(config.NAN_DETECTION_ENV, value)
    assert config.nan_detection_enabled()


@pytest.mark.parametrize("value", ["", "0", "false", "No", "off"])
def test_false_spellings_keep_a_gate_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(config.OOB_DETECTION_ENV, value)
    assert not config.oob_detection_enabled()


def test_gates_are_read_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.POISON_ENV, "1")
    assert config.poison_enabled()
    monkeypatch.setenv(config.POISON_ENV, "0")
    assert not config.poison_enabled()


def test_unknown_flag_value_names_the_variable_and_the_spellings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(config.NAN_DETECTION_ENV, "maybe")
    with pytest.raises(DetectUsageError) as excinfo:
        config.nan_detection_enabled()
    assert str(excinfo.value) == (
        "SGLANG_SPEC_NAN_DETECTION='maybe' is not a boolean: expected one of "
        "1, on, true, y, yes (on) or '', '0', 'false', 'n', 'no', 'off' (off)"
    )


def test_mode_defaults_to_raise() -> None:
    assert config.current_mode() == "raise"


def test_mode_comes_from_the_environment_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.MODE_ENV, "warn")
    assert config.current_mode() == "warn"
    monkeypatch.setenv(config.MODE_ENV, " Record ")
    assert config.current_mode() == "record"


def test_set_mode_overrides_the_environment_until_cleared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(config.MODE_ENV, "warn")
    config.set_mode("record")
    assert config.current_mode() == "record"
    config.set_mode(None)
    assert config.current_mode() == "warn"


def test_set_mode_rejects_an_unknown_mode_listing_the_choices() -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        config.set_mode("loud")
    assert str(excinfo.value) == (
        "set_mode(): unknown detection mode 'loud': expected one of raise, warn, record"
    )
    assert config.current_mode() == "raise"


def test_unknown_mode_in_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(config.MODE_ENV, "panic")
    with pytest.raises(DetectUsageError) as excinfo:
        config.current_mode()
    assert str(excinfo.value) == (
        "PRTOGGLE_DETECT_MODE: unknown detection mode 'panic': expected one of raise, warn, record"
    )


SGLANG_SWITCHES = [
    ("SGLANG_ENABLE_NAN_LOGITS_CHECK", "true", (True, False, False)),
    ("SGLANG_ENABLE_ASYNC_ASSERT", "y", (True, True, True)),
    ("SGLANG_INVARIANT_CHECK", "1", (True, True, True)),
    ("SGLANG_INVARIANT_CHECK", "2", (True, True, True)),
    ("SGLANG_INVARIANT_CHECK", "0", (False, False, False)),
]


@pytest.mark.parametrize(("name", "value", "expected"), SGLANG_SWITCHES)
def test_sglang_switches_are_aliases_of_ours(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, expected: tuple[bool, ...]
) -> None:
    monkeypatch.setenv(name, value)
    enabled = (
        config.nan_detection_enabled(),
        config.inf_detection_enabled(),
        config.oob_detection_enabled(),
    )
    assert enabled == expected


@pytest.mark.parametrize(("level", "mode"), [("1", "warn"), ("2", "raise"), ("0", "raise")])
def test_the_invariant_level_picks_the_mode_unless_ours_is_set(
    monkeypatch: pytest.MonkeyPatch, level: str, mode: str
) -> None:
    monkeypatch.setenv(config.SGLANG_INVARIANT_ENV, level)
    assert config.current_mode() == mode
    monkeypatch.setenv(config.MODE_ENV, "record")
    assert config.current_mode() == "record"


@pytest.mark.parametrize("value", ["3", "strict", "-1"])
def test_an_unknown_invariant_level_lists_the_levels(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(config.SGLANG_INVARIANT_ENV, value)
    with pytest.raises(DetectUsageError) as excinfo:
        config.nan_detection_enabled()
    assert str(excinfo.value) == (
        f"SGLANG_INVARIANT_CHECK={value!r} is not a level: expected one of 0 (off), 1 (warn), "
        "2 (strict)"
    )

"""Environment gating of the probes and the reporting mode (raise, warn or record).

Our switches, and sglang 0.5.x's names accepted as aliases (any one on turns probes on):

- NaN probes: SGLANG_SPEC_NAN_DETECTION; aliases SGLANG_ENABLE_NAN_LOGITS_CHECK,
  SGLANG_ENABLE_ASYNC_ASSERT, SGLANG_INVARIANT_CHECK >= 1;
- Inf probes: SGLANG_SPEC_NAN_DETECTION; aliases SGLANG_ENABLE_ASYNC_ASSERT,
  SGLANG_INVARIANT_CHECK >= 1 (sglang gates its Inf probe by the async-assert switch only);
- range probes: SGLANG_SPEC_OOB_DETECTION; aliases SGLANG_ENABLE_ASYNC_ASSERT,
  SGLANG_INVARIANT_CHECK >= 1.

SGLANG_INVARIANT_CHECK is a level, 0 (off), 1 (warn) or 2 (strict); without
PRTOGGLE_DETECT_MODE or set_mode() it also picks the mode: 1 -> "warn", 2 -> "raise".
Booleans take sglang's spellings too (y / n).

PRTOGGLE_HAND_PROBES=0 silences the hand-placed probes (maybe_detect_*, host range checks)
while instrument() / instrument_functions() keep probing: the automatic mode, which must
find a fault without any site chosen in advance.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from prtoggle.errors import DetectUsageError
from prtoggle.protocol import DETECT_MODE_ENV as MODE_ENV
from prtoggle.protocol import NAN_DETECTION_ENV, OOB_DETECTION_ENV, POISON_ENV

HAND_PROBES_ENV = "PRTOGGLE_HAND_PROBES"
SGLANG_ASYNC_ASSERT_ENV = "SGLANG_ENABLE_ASYNC_ASSERT"
SGLANG_NAN_LOGITS_ENV = "SGLANG_ENABLE_NAN_LOGITS_CHECK"
SGLANG_INVARIANT_ENV = "SGLANG_INVARIANT_CHECK"
INVARIANT_LEVELS = {0: "off", 1: "warn", 2: "strict"}

MODES = ("raise", "warn", "record")
DEFAULT_MODE = "raise"

_TRUE_VALUES = frozenset({"1", "true", "yes", "y", "on"})
_FALSE_VALUES = frozenset({"", "0", "false", "no", "n", "off"})


@dataclass
class _ModeOverride:
    """The mode set by set_mode(); None defers to PRTOGGLE_DETECT_MODE."""

    mode: str | None = None


_OVERRIDE = _ModeOverride()


def nan_detection_enabled() -> bool:
    """Whether the NaN probes are on: SGLANG_SPEC_NAN_DETECTION or an alias (read now)."""
    return (
        _flag(NAN_DETECTION_ENV)
        or _flag(SGLANG_NAN_LOGITS_ENV)
        or _flag(SGLANG_ASYNC_ASSERT_ENV)
        or invariant_level() > 0
    )


def inf_detection_enabled() -> bool:
    """Whether the Inf probes are on: SGLANG_SPEC_NAN_DETECTION or an alias (read now)."""
    return _flag(NAN_DETECTION_ENV) or _flag(SGLANG_ASYNC_ASSERT_ENV) or invariant_level() > 0


def oob_detection_enabled() -> bool:
    """Whether the range probes are on: SGLANG_SPEC_OOB_DETECTION or an alias (read now)."""
    return _flag(OOB_DETECTION_ENV) or _flag(SGLANG_ASYNC_ASSERT_ENV) or invariant_level() > 0


def hand_probes_enabled() -> bool:
    """Whether hand-placed probes run when their kind is on (PRTOGGLE_HAND_PROBES, default on)."""
    raw = os.environ.get(HAND_PROBES_ENV)
    return raw is None or _flag(HAND_PROBES_ENV)


def invariant_level() -> int:
    """sglang's SGLANG_INVARIANT_CHECK level: 0 off (also unset), 1 warn, 2 strict."""
    raw = os.environ.get(SGLANG_INVARIANT_ENV)
    if raw is None or not raw.strip():
        return 0
    try:
        level = int(raw.strip())
    except ValueError:
        level = -1
    if level not in INVARIANT_LEVELS:
        choices = ", ".join(f"{value} ({name})" for value, name in INVARIANT_LEVELS.items())
        raise DetectUsageError(
            f"{SGLANG_INVARIANT_ENV}={raw!r} is not a level: expected one of {choices}"
        )
    return level


def poison_enabled() -> bool:
    """Whether SGLANG_DEBUG_POISON asks for poisoned buffers with redzones (read now)."""
    return _flag(POISON_ENV)


def set_mode(mode: str | None) -> None:
    """Choose what check() does on a hit: "raise", "warn" or "record"; None: back to env."""
    if mode is not None:
        _validate_mode(mode, source="set_mode()")
    _OVERRIDE.mode = mode


def current_mode() -> str:
    """The mode in force: set_mode()'s choice, else PRTOGGLE_DETECT_MODE, else "warn" for
    SGLANG_INVARIANT_CHECK=1, else "raise"."""
    if _OVERRIDE.mode is not None:
        return _OVERRIDE.mode
    value = os.environ.get(MODE_ENV, "").strip().lower()
    if value:
        return _validate_mode(value, source=MODE_ENV)
    return "warn" if invariant_level() == 1 else DEFAULT_MODE


def _flag(name: str) -> bool:
    """Parse a boolean environment variable strictly: unknown spellings are errors."""
    raw = os.environ.get(name)
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in _TRUE_VALUES:
        return True
    if value in _FALSE_VALUES:
        return False
    raise DetectUsageError(
        f"{name}={raw!r} is not a boolean: expected one of "
        f"{', '.join(sorted(_TRUE_VALUES))} (on) or "
        f"{', '.join(repr(v) for v in sorted(_FALSE_VALUES))} (off)"
    )


def _validate_mode(mode: str, *, source: str) -> str:
    """Return `mode` if it is one of MODES, else raise naming the choices."""
    if mode not in MODES:
        raise DetectUsageError(
            f"{source}: unknown detection mode {mode!r}: expected one of {', '.join(MODES)}"
        )
    return mode

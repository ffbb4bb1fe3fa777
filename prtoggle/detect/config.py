"""Environment gating of the probes and the reporting mode (raise, warn or record)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from prtoggle.errors import DetectUsageError
from prtoggle.protocol import DETECT_MODE_ENV as MODE_ENV
from prtoggle.protocol import NAN_DETECTION_ENV, OOB_DETECTION_ENV, POISON_ENV

MODES = ("raise", "warn", "record")
DEFAULT_MODE = "raise"

_TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
_FALSE_VALUES = frozenset({"", "0", "false", "no", "off"})


@dataclass
class _ModeOverride:
    """The mode set by set_mode(); None defers to PRTOGGLE_DETECT_MODE."""

    mode: str | None = None


_OVERRIDE = _ModeOverride()


def nan_detection_enabled() -> bool:
    """Whether SGLANG_SPEC_NAN_DETECTION turns the NaN and Inf probes on (read now)."""
    return _flag(NAN_DETECTION_ENV)


def oob_detection_enabled() -> bool:
    """Whether SGLANG_SPEC_OOB_DETECTION turns the range probes on (read now)."""
    return _flag(OOB_DETECTION_ENV)


def poison_enabled() -> bool:
    """Whether SGLANG_DEBUG_POISON asks for poisoned buffers with redzones (read now)."""
    return _flag(POISON_ENV)


def set_mode(mode: str | None) -> None:
    """Choose what check() does on a hit: "raise", "warn" or "record"; None: back to env."""
    if mode is not None:
        _validate_mode(mode, source="set_mode()")
    _OVERRIDE.mode = mode


def current_mode() -> str:
    """The mode in force: set_mode()'s choice, else PRTOGGLE_DETECT_MODE, else "raise"."""
    if _OVERRIDE.mode is not None:
        return _OVERRIDE.mode
    value = os.environ.get(MODE_ENV, "").strip().lower()
    if not value:
        return DEFAULT_MODE
    return _validate_mode(value, source=MODE_ENV)


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

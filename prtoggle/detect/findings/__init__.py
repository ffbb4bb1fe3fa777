"""What the probes found: check(), hit records and their message, rows to requests."""

from __future__ import annotations

from prtoggle.errors import (
    Finding,
    InfDetected,
    NaNDetected,
    OOBDetected,
    PaddingLeakDetected,
    RedzoneRead,
    RedzoneViolation,
)

__all__ = [
    "Finding",
    "InfDetected",
    "NaNDetected",
    "OOBDetected",
    "PaddingLeakDetected",
    "RedzoneRead",
    "RedzoneViolation",
]

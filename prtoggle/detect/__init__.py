"""Sync-free NaN/Inf/out-of-bounds probes, host range checks, poisoned buffers and check().

Typical use (names, not numbers, in site strings; the phase and step are recorded apart):

    detect.maybe_detect_nan(out, "trtllm_mha.draft_decode[step=0].output")
    detect.maybe_detect_oob(seq_lens, 1, max_len + 1, "trtllm_mha.cache_seq_lens")
    with detect.phase("capture-warmup"):
        run()
    detect.check()    # raises NaNDetected / InfDetected / OOBDetected / RedzoneViolation
    detect.reset()

Importing this package does not import torch or triton.
"""

from __future__ import annotations

from prtoggle.detect.checking import check, report, reset
from prtoggle.detect.clock import PHASES, current_phase, current_step, phase, set_step
from prtoggle.detect.config import (
    MODES,
    current_mode,
    nan_detection_enabled,
    oob_detection_enabled,
    poison_enabled,
    set_mode,
)
from prtoggle.detect.host_checks import maybe_check_host_range
from prtoggle.detect.poison import poisoned_buffer
from prtoggle.detect.probes import (
    PROVIDERS,
    maybe_detect_inf,
    maybe_detect_nan,
    maybe_detect_oob,
    prepare_device,
)
from prtoggle.detect.report import DetectionReport, RedzoneHit, SiteHit

__all__ = [
    "MODES",
    "PHASES",
    "PROVIDERS",
    "DetectionReport",
    "RedzoneHit",
    "SiteHit",
    "check",
    "current_mode",
    "current_phase",
    "current_step",
    "maybe_check_host_range",
    "maybe_detect_inf",
    "maybe_detect_nan",
    "maybe_detect_oob",
    "nan_detection_enabled",
    "oob_detection_enabled",
    "phase",
    "poison_enabled",
    "poisoned_buffer",
    "prepare_device",
    "report",
    "reset",
    "set_mode",
    "set_step",
]

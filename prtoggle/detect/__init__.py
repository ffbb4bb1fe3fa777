"""Sync-free NaN/Inf/out-of-bounds probes, host range checks, poisoned buffers and check().

Typical use (names, not numbers, in site strings; the phase and step are recorded apart):

    detect.maybe_detect_nan(out, "trtllm_mha.draft_decode[step=0].output")
    detect.maybe_detect_oob(seq_lens, 1, max_len + 1, "trtllm_mha.cache_seq_lens")
    with detect.phase("capture-warmup"):
        run()
    detect.check()    # raises NaNDetected / InfDetected / OOBDetected / RedzoneViolation
    detect.reset()

    with detect.instrument(model, name="model"):   # every submodule output, by path
        model(batch)
    detect.check()    # the first writer leads: exc.first, exc.sites in first-hit order

Importing this package does not import torch or triton.
"""

from __future__ import annotations

from prtoggle.detect.config import (
    MODES,
    current_mode,
    hand_probes_enabled,
    inf_detection_enabled,
    invariant_level,
    nan_detection_enabled,
    oob_detection_enabled,
    poison_enabled,
    set_mode,
)
from prtoggle.detect.findings.checking import check, report, reset
from prtoggle.detect.findings.hits import DetectionReport, RedzoneHit, RedzoneReadHit, SiteHit
from prtoggle.detect.findings.requests import requests_for_rows, requests_hit
from prtoggle.detect.instrumentation.functions import FunctionInstrumentation, instrument_functions
from prtoggle.detect.instrumentation.modules import Instrumentation, instrument
from prtoggle.detect.instrumentation.padding import (
    DEFAULT_VARIANTS,
    OutputRecording,
    PaddingDivergence,
    PaddingVariant,
    check_padding_invariance,
    compare_padding,
    record_outputs,
)
from prtoggle.detect.probes.clock import PHASES, current_phase, current_step, phase, set_step
from prtoggle.detect.probes.host_checks import maybe_check_host_range
from prtoggle.detect.probes.site_probes import (
    PROVIDERS,
    maybe_detect_inf,
    maybe_detect_nan,
    maybe_detect_oob,
    prepare_device,
    record_float_tensors,
)
from prtoggle.detect.redzones.allocations import (
    AllocationRouting,
    RoutedAllocation,
    poisoned_allocations,
)
from prtoggle.detect.redzones.buffers import poisoned_buffer
from prtoggle.detect.redzones.guarded import guarded_allocations
from prtoggle.detect.redzones.reads import check_read

__all__ = [
    "DEFAULT_VARIANTS",
    "MODES",
    "PHASES",
    "PROVIDERS",
    "AllocationRouting",
    "DetectionReport",
    "FunctionInstrumentation",
    "Instrumentation",
    "OutputRecording",
    "PaddingDivergence",
    "PaddingVariant",
    "RedzoneHit",
    "RedzoneReadHit",
    "RoutedAllocation",
    "SiteHit",
    "check",
    "check_padding_invariance",
    "check_read",
    "compare_padding",
    "current_mode",
    "current_phase",
    "current_step",
    "guarded_allocations",
    "hand_probes_enabled",
    "inf_detection_enabled",
    "instrument",
    "instrument_functions",
    "invariant_level",
    "maybe_check_host_range",
    "maybe_detect_inf",
    "maybe_detect_nan",
    "maybe_detect_oob",
    "nan_detection_enabled",
    "oob_detection_enabled",
    "phase",
    "poison_enabled",
    "poisoned_allocations",
    "poisoned_buffer",
    "prepare_device",
    "record_float_tensors",
    "record_outputs",
    "report",
    "requests_for_rows",
    "requests_hit",
    "reset",
    "set_mode",
    "set_step",
]

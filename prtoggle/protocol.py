"""Names and formats shared by prtoggle and the child processes it starts (one home each).

Both sides import from here: the parent (`prtoggle run/repro/bisect/bench`), the start-up
hook of a child (prtoggle/_bootstrap), the pytest plugin, the detection probes and the demo
engine's scenarios and benchmarks (fixes/). Keep it tiny: no torch, no YAML, no prtoggle
module beyond this one, because the bootstrap imports it in every child Python.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping

REVERT_ENV = "SGLANG_DEBUG_REVERT_PR"
"""PRs whose fixes a process reverts at start-up: `26521`, `26521,24856` or `all`."""

YAML_PATH_ENV = "PRTOGGLE_YAML_PATH"
"""Folders of recipe collections, searched before the shipped ones (read when a revert is
chosen, never at import)."""

WHOLE_ONLY_ENV = "PRTOGGLE_WHOLE_ONLY"
"""`1`: refuse every revert that would use a partial recipe (one with `not_reverted`)."""

NAN_DETECTION_ENV = "SGLANG_SPEC_NAN_DETECTION"
OOB_DETECTION_ENV = "SGLANG_SPEC_OOB_DETECTION"
POISON_ENV = "SGLANG_DEBUG_POISON"
DETECT_MODE_ENV = "PRTOGGLE_DETECT_MODE"

DETECTION_ENV: Mapping[str, str] = {
    NAN_DETECTION_ENV: "1",
    OOB_DETECTION_ENV: "1",
    POISON_ENV: "1",
}
"""Every detection switch on: set for both runs of `prtoggle repro`, so a failure has a name."""

KERNEL_PROVIDERS = ("torch", "triton", "flashinfer")
"""Values of `--provider` that scenario and benchmark modules accept (none: the device's
default); a module that does not support one reports that as its failure."""

OUTCOME_PREFIX = "prtoggle-outcome: "
"""Last stderr line of a scenario child: this prefix, then its outcome as one JSON object
with `outcome` ("clean" or "failure"), `error`, `site` and `message`."""

BOOTSTRAP_FAILURE_PREFIX = "prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR"
"""How a child's start-up hook says on stderr that it could not revert (bisect: skip)."""

BOOTSTRAP_FAILURE_EXIT_CODE = 78
"""EX_CONFIG: the status of a child whose start-up hook cannot honour its revert request."""

RUN_NOT_REVERTED_EXIT_CODE = 78
"""The parent's verdict: `prtoggle run` exits with it (one `prtoggle run:` line) when a
requested revert did not land in its command's processes. The same number as a refusing
child's (EX_CONFIG), so a command that passes its child's refusal on reads alike."""

RUN_REPORT_ENV = "PRTOGGLE_RUN_REPORT_DIR"
"""Set by `prtoggle run`: a directory where every Python process of the command that reverts
writes `<pid>.json` (write_run_report), so that the parent learns whether the reverts landed."""

TRACE_ENV = "PRTOGGLE_TRACE_DIR"
"""Set by `bisect --git` on the run with nothing reverted: every Python process of the command
writes `<pid>.trace.json` there at exit (prtoggle/revert/run_trace.py): the modules it
imported and the functions it ran, so that commits changing neither are not searched."""

TRACE_PACKAGES_ENV = "PRTOGGLE_TRACE_PACKAGES"
"""Set with TRACE_ENV: the top-level packages (comma-separated) the range changes; imports of
other packages' modules run untraced (run_trace.start's `packages`)."""

BENCH_RESULT_KEYS = (
    "name",
    "timed",
    "unit",
    "median",
    "samples",
    "shape",
    "in_force",
    "reverted",
)
"""Keys of the one JSON object a benchmark child prints last with `--json`
(fixes/benchmarks/common.py BenchResult): `samples` (per call, in `unit`) are timed with
the fix in force, `in_force` lists the PRs reverted in the process meanwhile (expected:
none), `reverted` is the paired reverted half (BENCH_REVERTED_KEYS) or null."""

BENCH_REVERTED_KEYS = ("pr", "samples", "in_force", "error", "extras")
"""Keys of a benchmark result's `reverted` object: the PR toggled between samples, its
samples (samples[i] taken beside the fixed samples[i]), the PRs in force for every one of
them (expected: [pr]), the first error of a reverted call (or null), extra figures."""


def module_command(module: str, *, device: str, provider: str | None) -> list[str]:
    """`python -m <module> --device D [--provider P]` with this interpreter.

    The command line every scenario and benchmark module of a fix accepts.
    """
    argv = [sys.executable, "-m", module, "--device", device]
    if provider is not None:
        argv += ["--provider", provider]
    return argv


def write_run_report(record: Mapping[str, object]) -> None:
    """Write this process's report for `prtoggle run` (no-op outside one); last write wins.

    `record` holds `state` ("in-force", "refused" or "exited") and what goes with it; the
    pid and command line are added. Written whole (a rename), so the parent never reads half.
    """
    directory = os.environ.get(RUN_REPORT_ENV, "")
    if not directory:
        return
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    path = os.path.join(directory, f"{os.getpid()}.json")
    try:
        with open(f"{path}.tmp", "w", encoding="utf-8") as stream:
            json.dump({**record, "pid": os.getpid(), "argv": argv}, stream)
        os.replace(f"{path}.tmp", path)
    except OSError:
        pass  # the parent is gone (or never made the directory): it reports the silence


def shell_status(returncode: int) -> int:
    """The status a shell reports for a child's return code: a signal N becomes 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


TRACE_FROM_HERE = "+trace"
"""In a warm server's argv, between the modules it preloads untraced and those it traces
when PRTOGGLE_TRACE_DIR asks (no module is named so)."""

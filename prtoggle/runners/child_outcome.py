"""How a finished child ended: its exit class as `git bisect run` reads it, last exception, tail."""

from __future__ import annotations

import re
from typing import Literal

from prtoggle.protocol import BOOTSTRAP_FAILURE_PREFIX
from prtoggle.runners.child_process import CommandRun

PATCH_FAILURE_NAMES = ("PatchApplicationError", "TargetResolutionError", "UnsupportedTargetError")
"""Errors by which a child's start-up says a revert did not apply (bisect: skip)."""

ExitClass = Literal["good", "bad", "skip", "crash", "timeout"]

_EXCEPTION_LINE = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Detected|Violation|"
    r"Exit|Interrupt|Failed|Fault))(?::\s?(?P<message>.*))?$"
)
_TAIL_CHARS = 4000


def classify_exit(run: CommandRun) -> ExitClass:
    """Read an exit status like `git bisect run`: 0 good, 125 skip, 1..127 bad.

    A signal or a status above 127 is a crash and no status within the time limit is a
    timeout; the caller decides how those count. A child whose start-up reports that a
    revert did not apply (a PatchApplicationError) is a skip whatever its status.
    """
    if run.timed_out:
        return "timeout"
    if run.returncode != 0 and reports_patch_failure(run.stderr):
        return "skip"
    if run.returncode == 0:
        return "good"
    if run.returncode == 125:
        return "skip"
    if run.returncode is not None and 0 < run.returncode < 128:
        return "bad"
    return "crash"


def reports_patch_failure(stderr: str) -> bool:
    """Whether the child's stderr says a revert failed to apply (start-up hook or later)."""
    if any(line.startswith(BOOTSTRAP_FAILURE_PREFIX) for line in stderr.splitlines()):
        return True
    error_type, _message = last_exception(stderr)
    return error_type is not None and error_type.rsplit(".", 1)[-1] in PATCH_FAILURE_NAMES


def last_exception(stderr: str) -> tuple[str | None, str]:
    """The type and message of the last `Type: message` line of a traceback in `stderr`."""
    for line in reversed(stderr.splitlines()):
        match = _EXCEPTION_LINE.match(line.strip())
        if match:
            return match.group("type"), (match.group("message") or "").strip()
    return None, ""


def output_tail(run: CommandRun, *, chars: int = _TAIL_CHARS) -> str:
    """The end of the child's stdout and stderr, for a diagnostic."""
    text = (run.stdout + run.stderr).rstrip()
    return text[-chars:]

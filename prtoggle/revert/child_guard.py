"""A reverting child's guard: a revert that cannot land at import ends it with one stderr line."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from prtoggle.errors import PatchApplicationError
from prtoggle.protocol import write_run_report


def stop_process_on_failure(*, exit_status: int, prefix: str) -> None:
    """A deferred revert that fails at import ends the process: `prefix: error`, status."""
    _GUARD.prefix = prefix
    _GUARD.exit_status = exit_status
    if _GUARD.stderr_fd is None:
        # A copy of fd 2 as it is now: a harness that later redirects fd 2 (pytest's
        # capture during collection) would otherwise swallow the line when we _exit.
        _GUARD.stderr_fd = os.dup(2)


def stop_if_guarded(exc: PatchApplicationError) -> None:
    """In a guarded child, a revert that cannot land ends the process (one stderr line)."""
    if _GUARD.exit_status is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    write_run_report({"state": "refused", "error": str(exc)})  # for a `prtoggle run` parent
    line = f"{_GUARD.prefix}: {exc}\n".encode(errors="replace")
    os.write(2 if _GUARD.stderr_fd is None else _GUARD.stderr_fd, line)
    os._exit(_GUARD.exit_status)


@dataclass
class _ChildGuard:
    """Set by the bootstrap (stop_process_on_failure): how this child reacts."""

    exit_status: int | None = None  # stop the process with this status on a deferred failure
    prefix: str = ""  # starts the one stderr line
    stderr_fd: int | None = None  # the stderr of start-up, kept from later fd-level capture


_GUARD = _ChildGuard()

"""A child's start-up: revert what SGLANG_DEBUG_REVERT_PR names, or say why and exit 78."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from prtoggle.protocol import (
    BOOTSTRAP_FAILURE_EXIT_CODE,
    BOOTSTRAP_FAILURE_PREFIX,
    write_run_report,
)


def revert_or_exit() -> None:
    """Guard this process, then apply the requested reverts; never run silently unreverted.

    The one sequence of the start-up hook (prtoggle/_bootstrap) and of the warm worker's
    forks. A request that cannot be honoured (bad value, unknown PR, broken registry, an
    edit that does not apply, now or when its module is imported) ends the process through
    exit_unreverted().
    """
    from prtoggle.errors import PrToggleError

    try:
        from prtoggle.revert.toggle import guard_child_process, maybe_revert_pr_fix

        guard_child_process(exit_status=BOOTSTRAP_FAILURE_EXIT_CODE)
        maybe_revert_pr_fix()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # any failure is a refusal, never an unreverted run
        own = isinstance(exc, (PrToggleError, ImportError))
        exit_unreverted(str(exc) if own else f"{type(exc).__name__}: {exc}")


def exit_unreverted(reason: str) -> NoReturn:
    """One `prtoggle: <reason>` line on stderr (and a `refused` report for a `prtoggle run`
    parent), then exit status 78 at once (no cleanup)."""
    write_run_report({"state": "refused", "error": reason})
    sys.stderr.write(f"{BOOTSTRAP_FAILURE_PREFIX}: {reason}\n")
    sys.stderr.flush()
    os._exit(BOOTSTRAP_FAILURE_EXIT_CODE)

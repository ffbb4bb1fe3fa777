"""A child's start-up: revert what SGLANG_DEBUG_REVERT_PR names, or say why and exit 78."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from prtoggle.protocol import BOOTSTRAP_FAILURE_EXIT_CODE, BOOTSTRAP_FAILURE_PREFIX


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
    except (PrToggleError, ImportError) as exc:
        exit_unreverted(str(exc))


def exit_unreverted(reason: str) -> NoReturn:
    """One `prtoggle: <reason>` line on stderr, then exit status 78 at once (no cleanup)."""
    sys.stderr.write(f"{BOOTSTRAP_FAILURE_PREFIX}: {reason}\n")
    sys.stderr.flush()
    os._exit(BOOTSTRAP_FAILURE_EXIT_CODE)

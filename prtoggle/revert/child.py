"""The child contract: how a reverting child starts, when it refuses, and how.

One home for the side of a process that prtoggle asked to revert (through
SGLANG_DEBUG_REVERT_PR): the start-up hook (prtoggle/_bootstrap), the warm worker's forks
(prtoggle/runners/warm_server.py) and the runtime (`maybe_revert_pr_fix`) all call it.

- **Start-up** (`start`): a child makes itself strict, then applies the request. Any
  exception (a bad value, an unknown PR, a broken registry, an edit that does not apply, a
  Python too old for prtoggle) is a refusal; Ctrl-C stays an interrupt.
- **Strict** (`make_strict`): a deferred revert that fails when its module is imported
  (prtoggle.revert.state raises it to the importing statement) ends the process first, so a
  program that catches the error never runs on unreverted.
- **Refusal** (`refuse`): a `refused` report for a `prtoggle run` parent, one
  `prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: ...` line on the stderr of start-up, and
  `os._exit(BOOTSTRAP_FAILURE_EXIT_CODE)` (78) at once, with no clean-up.
- **Reports**: what a reverting process tells a `prtoggle run` parent is
  prtoggle.revert.process_report's (the runtime calls it too, below this layer).

Module level imports only the standard library, prtoggle.protocol and prtoggle.errors, so
the bootstrap can import it in any child Python; the rest is imported when it is needed.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from prtoggle.protocol import (
    BOOTSTRAP_FAILURE_EXIT_CODE,
    BOOTSTRAP_FAILURE_PREFIX,
    write_run_report,
)

if TYPE_CHECKING:
    from prtoggle.errors import PatchApplicationError

__all__ = ["make_strict", "reason_of", "refuse", "start"]


@dataclass
class _Child:
    """This process's side of the contract (a forked child starts from its parent's)."""

    strict: bool = False  # a deferred revert that fails ends the process
    stderr_fd: int | None = None  # fd 2 as it was at start-up, kept from later capture


_CHILD = _Child()


def start() -> None:
    """Make this process strict and revert what SGLANG_DEBUG_REVERT_PR names, or refuse.

    The one start-up sequence of the bootstrap and of the warm worker's forks: a request
    that cannot be honoured, now or later at an import, ends the process through refuse().
    """
    try:
        make_strict()
        from prtoggle.revert.toggle import maybe_revert_pr_fix

        maybe_revert_pr_fix()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # any failure is a refusal, never an unreverted run
        refuse(reason_of(exc))


def make_strict() -> None:
    """From now on a deferred revert that fails at an import ends this process (refuse).

    prtoggle's warnings go to stderr as `prtoggle: ...` lines; nothing else is said there.
    """
    if _CHILD.stderr_fd is None:
        # A copy of fd 2 as it is now: a harness that later redirects fd 2 (pytest's
        # capture during collection) would otherwise swallow the refusal line.
        _CHILD.stderr_fd = os.dup(2)
    if not _CHILD.strict:
        _CHILD.strict = True
        from prtoggle.revert import events, processes

        events.listen(on_failure=_refuse_deferred)
        processes.log_to_stderr()


def refuse(reason: str) -> NoReturn:
    """Say why the requested reverts cannot be honoured and exit 78 at once (no clean-up)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    write_run_report({"state": "refused", "error": reason})  # for a `prtoggle run` parent
    line = f"{BOOTSTRAP_FAILURE_PREFIX}: {reason}\n".encode(errors="replace")
    with contextlib.suppress(OSError):  # no stderr left: the status and report still say it
        os.write(2 if _CHILD.stderr_fd is None else _CHILD.stderr_fd, line)
    os._exit(BOOTSTRAP_FAILURE_EXIT_CODE)


def reason_of(exc: BaseException) -> str:
    """An error as a refusal says it: prtoggle's own and import errors by their message."""
    errors = sys.modules.get("prtoggle.errors")
    own = getattr(errors, "PrToggleError", None)
    explained = (ImportError,) if own is None else (ImportError, own)
    return str(exc) if isinstance(exc, explained) else f"{type(exc).__name__}: {exc}"


def _refuse_deferred(exc: PatchApplicationError) -> None:
    if _CHILD.strict:
        refuse(str(exc))

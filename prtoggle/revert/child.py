"""The child contract: what a reverting process reports, when a child refuses, and how.

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
- **Reports** (`report_in_force`): under a `prtoggle run` parent (PRTOGGLE_RUN_REPORT_DIR),
  a process whose reverts are put in force writes `in-force` (PRs, recipes, what is patched)
  at once and again whenever a deferred target lands, and `exited` at exit; at exit any
  requested revert whose module was imported but never patched is also one stderr line.

Module level imports only the standard library, prtoggle.protocol and prtoggle.errors, so
the bootstrap can import it in any child Python; the rest is imported when it is needed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from prtoggle.protocol import (
    BOOTSTRAP_FAILURE_EXIT_CODE,
    BOOTSTRAP_FAILURE_PREFIX,
    RUN_REPORT_ENV,
    write_run_report,
)

if TYPE_CHECKING:
    from prtoggle.errors import PatchApplicationError

__all__ = ["make_strict", "reason_of", "refuse", "report_exec", "report_in_force", "start"]


@dataclass
class _Child:
    """This process's side of the contract (a forked child starts from its parent's)."""

    strict: bool = False  # a deferred revert that fails ends the process
    stderr_fd: int | None = None  # fd 2 as it was at start-up, kept from later capture
    reporting: bool = False  # the landing listener and the exit report are registered


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


def report_in_force(prs: Sequence[int]) -> None:
    """`prs` were put in force here: report it now, as deferred targets land, and at exit.

    The report goes to a `prtoggle run` parent (none outside one); the exit check, which
    says on stderr what was imported and never patched, runs in every such process.
    """
    if not prs:
        return
    _write_report("in-force")
    if not _CHILD.reporting:  # once a process: a forked child inherits both
        _CHILD.reporting = True
        from prtoggle.revert import events

        events.listen(on_landed=_on_landed)
        atexit.register(_at_exit)


def report_exec(path: object, argv: object) -> None:
    """This process is about to exec `argv` (at `path`): say so to a `prtoggle run` parent.

    If the new program is a Python that reverts, its own report replaces this one (same
    pid); if it never reports, the parent sees that a Python was exec'd unreverted.
    """
    shown = [os.fsdecode(a) if isinstance(a, (str, bytes)) else str(a) for a in argv or ()]  # type: ignore[attr-defined]
    executable = os.fsdecode(path) if isinstance(path, (str, bytes)) else str(path)
    _write_report("exec", extra={"exec": [executable, *shown[1:]]})


def _refuse_deferred(exc: PatchApplicationError) -> None:
    if _CHILD.strict:
        refuse(str(exc))


def _on_landed(_pr: int) -> None:
    _write_report("in-force")


def _write_report(
    state_name: str,
    *,
    unapplied: dict[int, tuple[str, ...]] | None = None,
    extra: dict[str, object] | None = None,
) -> None:
    """This process's report: PRs held, their recipes, which recipes have patched code."""
    if not os.environ.get(RUN_REPORT_ENV):
        return
    from prtoggle.revert import state

    with state.locked():
        prs = state.held_prs()
        record = {
            "state": state_name,
            "prs": list(prs),
            "recipes": {str(pr): list(state.labels_of(pr)) for pr in prs},
            "landed": {str(pr): list(state.landed_labels(pr)) for pr in prs},
            "unapplied": {str(pr): list(t) for pr, t in (unapplied or {}).items()},
            **(extra or {}),
        }
    write_run_report(record)


def _at_exit() -> None:
    """The exit report: imported-but-unpatched targets, to the parent and on stderr."""
    from prtoggle.revert import state

    unapplied = state.unapplied_imported_targets()
    _write_report("exited", unapplied=unapplied)
    for pr, targets in sorted(unapplied.items()):
        sys.stderr.write(
            f"prtoggle: PR {pr} was requested but never reverted: {', '.join(targets)} "
            "imported and not patched\n"
        )
    sys.stderr.flush()

"""What a reverting process reports to a `prtoggle run` parent: in force, an exec, its exit.

Under a `prtoggle run` parent (PRTOGGLE_RUN_REPORT_DIR), a process whose reverts are put in
force writes `in-force` (PRs, recipes, which recipes have code patched) at once and again
whenever a deferred target lands, `exec` before it replaces itself with another program,
and `exited` at exit; at exit any requested revert whose module was imported but never
patched is also one stderr line (in every reverting process, parent or not). The parent's
side (reading and judging the reports) is prtoggle.revert.child_report. Process-global:
the listener and the exit hook are registered once a process (a forked child inherits them).
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from prtoggle.protocol import RUN_REPORT_ENV, write_run_report

__all__ = ["report_exec", "report_in_force"]


@dataclass
class _Reporting:
    """Whether this process registered its landing listener and exit report."""

    registered: bool = False


_REPORTING = _Reporting()


def report_in_force(prs: Sequence[int]) -> None:
    """`prs` were put in force here: report it now, as deferred targets land, and at exit.

    The report goes to a `prtoggle run` parent (none outside one); the exit check, which
    says on stderr what was imported and never patched, runs in every such process.
    """
    if not prs:
        return
    _write_report("in-force")
    if not _REPORTING.registered:  # once a process: a forked child inherits both
        _REPORTING.registered = True
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
            "waiting": {str(pr): list(state.waiting_of(pr)) for pr in prs},
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

"""Reverts in every process of a program: children's start-up hook on PYTHONPATH, in-force log.

A program with reverts in force (through `prtoggle run`'s start-up hook or its own
`maybe_revert_pr_fix()`) passes them on: the start-up hook's directory goes first on
`os.environ["PYTHONPATH"]`, so a child Python it starts (multiprocessing's spawn, a
subprocess) reverts SGLANG_DEBUG_REVERT_PR at start-up too, strictly, as under `prtoggle
run`; a forked child inherits the patched code. Each process logs one line when reverts are
put in force in it (pid, PRs, each fix as `collection/PR`; a forked child that asks again logs
its own). What a process reports, and when it refuses: prtoggle.revert.child.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prtoggle.revert import state as revert_state

BOOTSTRAP_DIR = Path(__file__).resolve().parent.parent / "_bootstrap"

__all__ = [
    "BOOTSTRAP_DIR",
    "announce_in_force",
    "log_to_stderr",
    "pass_on_to_children",
]

logger = logging.getLogger(__name__)


@dataclass
class _ProcessRecord:
    """What this process has said already, by pid (a forked child starts from its parent's)."""

    announced: dict[int, set[int]] = field(default_factory=dict)  # pid -> PRs logged in force
    stderr_handler: logging.Handler | None = None


_RECORD = _ProcessRecord()


def pass_on_to_children() -> None:
    """Put the start-up hook first on os.environ's PYTHONPATH: child Pythons revert too."""
    existing = os.environ.get("PYTHONPATH", "")
    paths = [p for p in existing.split(os.pathsep) if p]
    if paths[:1] != [str(BOOTSTRAP_DIR)]:
        paths = [str(BOOTSTRAP_DIR), *(p for p in paths if p != str(BOOTSTRAP_DIR))]
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)


def announce_in_force(prs: Sequence[int]) -> None:
    """Log once per process which of `prs` are in force here, and each one's fixes.

    One line for the PRs not yet announced by this pid: `pid N: PR 27460 in force
    (sglang/27460)`. Caller holds revert_state.locked().
    """
    pid = os.getpid()
    announced = _RECORD.announced.setdefault(pid, set())
    new = [pr for pr in prs if pr not in announced]
    if not new:
        return
    announced.update(new)
    labels = [label for pr in new for label in revert_state.labels_of(pr)]
    named = f"PR {new[0]}" if len(new) == 1 else "PRs " + ", ".join(map(str, new))
    logger.info("pid %d: %s in force (%s)", pid, named, ", ".join(labels))


def log_to_stderr() -> None:
    """prtoggle's warnings on stderr as `prtoggle: ...` lines, and only there; nothing else.

    For processes whose reverts prtoggle started (a `prtoggle run` child, a child of a
    program that put reverts in force): they stay quiet (the in-force line is not said:
    the parent says it once, from the run reports), and the program's own logging set-up,
    made later, is not asked, so no line shows twice.
    """
    if _RECORD.stderr_handler is not None:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("prtoggle: %(message)s"))
    root = logging.getLogger("prtoggle")
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    root.propagate = False
    _RECORD.stderr_handler = handler

"""Reverts in every process of a program: the start-up hook passed on, exec'd Pythons included.

A program with reverts in force (through `prtoggle run`'s start-up hook or its own
`maybe_revert_pr_fix()`) passes them on: the start-up hook's directory goes first on
`os.environ["PYTHONPATH"]` and a relative PRTOGGLE_YAML_PATH is made absolute (resolved once,
here, not again in each child's working directory), so a child Python it starts
(multiprocessing's spawn, a subprocess) reverts SGLANG_DEBUG_REVERT_PR at start-up too,
strictly, as under `prtoggle run`; a forked child inherits the patched code.
While reverts are held, an audit hook (process-global, never removed; it acts only on the
events `os.exec`, `os.posix_spawn` and `subprocess.Popen`) puts the start-up hook back into
the environment a program hands to `os.exec*` (a launcher that re-executes Python with its
own PYTHONPATH; there the missing revert, report and recipe variables are carried over
too, since it is the same process) and into a `subprocess.Popen` environment that asks for
a revert. An `os.posix_spawn`/`os.posix_spawnp` environment that asks for a revert without
the hook is refused (the call raises RunnerError and no child starts): that call cannot be
made again with the hook. Each process logs one line at INFO when reverts are put in force
in it (pid, PRs, each fix as `collection/PR`). What a process reports:
prtoggle.revert.process_report; when it refuses: prtoggle.revert.child.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prtoggle.protocol import REVERT_ENV, RUN_REPORT_ENV
from prtoggle.recipes.registry import YAML_PATH_ENV
from prtoggle.revert import state as revert_state
from prtoggle.revert.partial import in_force_line

BOOTSTRAP_DIR = Path(__file__).resolve().parent.parent / "_bootstrap"

__all__ = [
    "BOOTSTRAP_DIR",
    "announce_in_force",
    "log_to_stderr",
    "pass_on_to_children",
    "resolve_yaml_path",
    "with_start_up_hook",
]

logger = logging.getLogger(__name__)


@dataclass
class _ProcessRecord:
    """What this process has said already, by pid (a forked child starts from its parent's)."""

    announced: dict[int, set[int]] = field(default_factory=dict)  # pid -> PRs logged in force
    stderr_handler: logging.Handler | None = None
    exec_hook: bool = False  # the audit hook is installed (for the process's lifetime)


_RECORD = _ProcessRecord()


def pass_on_to_children() -> None:
    """Child Pythons and exec'd ones revert too: the start-up hook first on PYTHONPATH, an
    absolute PRTOGGLE_YAML_PATH, and the exec audit hook (see the module docstring)."""
    resolve_yaml_path(os.environ)
    with_start_up_hook(os.environ)
    if not _RECORD.exec_hook:
        _RECORD.exec_hook = True
        sys.addaudithook(_audit)


def with_start_up_hook(env: MutableMapping[str, str]) -> None:
    """Put the start-up hook's directory first on `env`'s PYTHONPATH (in place)."""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if paths[:1] != [str(BOOTSTRAP_DIR)]:
        paths = [str(BOOTSTRAP_DIR), *(p for p in paths if p != str(BOOTSTRAP_DIR))]
        env["PYTHONPATH"] = os.pathsep.join(paths)


def resolve_yaml_path(env: MutableMapping[str, str]) -> None:
    """Make `env`'s PRTOGGLE_YAML_PATH absolute against this process's working directory.

    The process that was asked resolves it once; a child that changes directory then reads
    the same recipe directories, never another folder's of the same name.
    """
    value = env.get(YAML_PATH_ENV)
    if value:
        parts = [
            os.path.abspath(part) if part.strip() else part for part in value.split(os.pathsep)
        ]
        env[YAML_PATH_ENV] = os.pathsep.join(parts)


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
    # A partial revert says so (issue 27): as a warning where nobody else will; under a
    # prtoggle parent (its report directory set) the parent says it once, so a child stays
    # quiet (issue 26.10).
    level = logging.INFO if os.environ.get(RUN_REPORT_ENV) else logging.WARNING
    for pr in new:
        line = in_force_line(pr, revert_state.recipes_of(pr))
        if line is not None:
            logger.log(level, "pid %d: %s", pid, line)


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


_EXEC_EVENTS = frozenset({"os.exec", "os.posix_spawn", "subprocess.Popen"})
_CARRIED = (REVERT_ENV, RUN_REPORT_ENV, YAML_PATH_ENV)


def _audit(event: str, args: tuple[object, ...]) -> None:
    """Every audited event of the process comes here: keep the rest as cheap as possible."""
    if event in _EXEC_EVENTS and revert_state.held_prs():
        if event == "os.exec":
            _on_exec(*args[:3])
        elif event == "os.posix_spawn":  # os.posix_spawn and os.posix_spawnp
            _on_spawn(args[0], args[2])
        else:
            _on_popen(args[3])


def _on_exec(path: object, argv: object, env: object) -> None:
    """os.exec*: the new program is this process, reverted as it was asked to be.

    With no `env` the exec'd program gets os.environ (fixed here, in place). os.execve has
    already copied an explicit `env` when the event comes: then the exec is made again,
    from here, with a fixed copy (it does not return; an error is the original call's).
    """
    from prtoggle.revert import process_report

    process_report.report_exec(path, argv)  # the exec'd Python overwrites it once it reports itself
    if env is None:
        with_start_up_hook(os.environ)
        return
    if not isinstance(env, Mapping) or not all(isinstance(k, str) for k in env):
        return  # bytes keys or an odd mapping: the report above tells the parent
    fixed: dict[str, str] = dict(env)
    for name in _CARRIED:
        if name in os.environ and name not in fixed:
            fixed[name] = os.environ[name]
    with_start_up_hook(fixed)
    if fixed != env:
        os.execve(path, argv, fixed)  # type: ignore[arg-type]


def _on_popen(env: object) -> None:
    """subprocess.Popen with an environment that asks for a revert: the hook goes back in."""
    if isinstance(env, MutableMapping) and str(env.get(REVERT_ENV, "")).strip() not in ("", "0"):
        with_start_up_hook(env)


def _on_spawn(path: object, env: object) -> None:
    """os.posix_spawn[p]: a child whose environment asks for a revert but leaves the start-up
    hook off its PYTHONPATH would run unreverted. The call has already copied `env` when the
    event comes, and its other arguments are not in the event, so it cannot be made again
    with the hook: it is refused (the caller gets the error; no child starts)."""
    if not isinstance(env, Mapping):
        return
    text = {os.fsdecode(k): os.fsdecode(v) for k, v in env.items() if isinstance(k, str | bytes)}
    request = text.get(REVERT_ENV, "").strip()
    if request in ("", "0"):
        return  # not asked to revert: the program's choice, as with subprocess
    fixed = dict(text)
    with_start_up_hook(fixed)
    if fixed == text:
        return
    from prtoggle.errors import RunnerError

    program = os.fsdecode(path) if isinstance(path, str | bytes) else str(path)
    raise RunnerError(
        f"os.posix_spawn of {program}: its environment asks for {REVERT_ENV}={request} but "
        f"its PYTHONPATH leaves out prtoggle's start-up hook ({BOOTSTRAP_DIR}), so the child "
        "would run unreverted; give it an environment whose PYTHONPATH starts with that "
        f"directory (os.environ has it), start it with subprocess, or leave {REVERT_ENV} "
        "out of its environment to run it unreverted"
    )

"""Run a command in a child process of its own group, with a timeout; own and end such groups."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prtoggle.errors import RunnerError
from prtoggle.protocol import shell_status

GRACE_SECONDS = 1.0
"""How long owned children get between SIGTERM and SIGKILL when this process is interrupted."""

_OWNED_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)
"""A hang-up (a closed terminal, an ssh drop) ends what a command started, as SIGTERM does."""
_PROC = Path("/proc")


class Interrupted(BaseException):
    """SIGHUP, SIGINT or SIGTERM reached a process that owns children: they are ended; 128+N.

    A BaseException, like KeyboardInterrupt, so that `except Exception` does not hide it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return f"interrupted by {signal.Signals(self.signum).name}"


@dataclass(frozen=True)
class CommandRun:
    """A finished child: its exit status (None after a timeout), wall time and output."""

    argv: tuple[str, ...]
    returncode: int | None
    seconds: float
    stdout: str
    stderr: str
    timeout: float | None = None

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def signal_name(self) -> str | None:
        """The signal that ended the child (negative status or shell-style 128+N), if any."""
        if self.returncode is None:
            return None
        number = -self.returncode if self.returncode < 0 else self.returncode - 128
        if self.returncode >= 0 and not 0 < number < 64:
            return None
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"

    def shell_exit_code(self) -> int:
        """The status a shell would report: a signal N becomes 128 + N, a timeout 124."""
        if self.returncode is None:
            return 124
        return shell_status(self.returncode)


def run_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    cwd: str | None = None,
) -> CommandRun:
    """Run `argv` to completion in a new session, capturing its output.

    On timeout its process group is killed (returncode None). Under `owning_children()`
    a signal ends it too (see there); a run started or finished after that raises
    Interrupted instead of returning.
    """
    if not argv:
        raise RunnerError("no command given: expected a program and its arguments after `--`")
    started = time.monotonic()
    process = start_child(argv, env=env, cwd=cwd, capture=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        returncode: int | None = process.returncode
    except subprocess.TimeoutExpired:
        end_groups([process.pid], grace=0.0)
        stdout, stderr = process.communicate()
        returncode = None
    except BaseException:
        end_groups([process.pid], grace=0.0)
        process.wait()
        raise
    finally:
        disown(process.pid)
    _OWNER.raise_if_stopping()
    return CommandRun(
        argv=tuple(argv),
        returncode=returncode,
        seconds=time.monotonic() - started,
        stdout=stdout,
        stderr=stderr,
        timeout=timeout,
    )


def run_in_foreground(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> int:
    """Run `argv` with this process's stdin/stdout/stderr in its own process group; its status.

    When stdin is the terminal this process has in the foreground, the child's group gets
    the terminal for its run (so Ctrl-C and terminal input reach the child, as in a shell)
    and this process takes it back afterwards. The status is the child's return code
    (negative: killed by that signal).
    """
    if not argv:
        raise RunnerError("no command given: expected a program and its arguments after `--`")
    terminal = _foreground_terminal()
    process = start_child(argv, env=env, capture=False, terminal=terminal)
    try:
        return process.wait()
    except BaseException:  # after a signal, the handler has ended the group already
        end_groups([process.pid], grace=0.0 if _OWNER.stopping else GRACE_SECONDS)
        process.wait()
        raise
    finally:
        disown(process.pid)
        if terminal is not None:
            _give_terminal_to(os.getpgrp(), terminal)


def start_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    capture: bool,
    terminal: int | None = None,
) -> subprocess.Popen[str]:
    """Start `argv` as the leader of a new process group that this process owns.

    `capture`: pipes for stdout and stderr, stdin from /dev/null, in a new session;
    otherwise the child inherits all three, in a new process group of this session
    (`terminal`: a terminal descriptor whose foreground the child takes at start). The
    caller waits for the child and then calls `disown(process.pid)`.
    Under `owning_children()` a child started after a signal arrived is ended at once and
    Interrupted raised; RunnerError when the program cannot be started.
    """
    _OWNER.raise_if_stopping()
    options: dict[str, Any] = {"env": dict(env) if env is not None else None, "cwd": cwd}
    if capture:
        options.update(
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    else:
        options["process_group"] = 0
        if terminal is not None:
            options["preexec_fn"] = functools.partial(_give_terminal_to, 0, terminal)
    with _OWNER.starting():
        try:
            process: subprocess.Popen[str] = subprocess.Popen(list(argv), **options)
        except OSError as exc:
            raise RunnerError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from exc
        _OWNER.running[process.pid] = functools.partial(_has_exited, process)
    if _OWNER.stopping is not None:  # the signal came while it started: it ends too
        end_groups([process.pid], grace=0.0)
        _OWNER.raise_if_stopping()
    return process


def own_group(pgid: int, *, has_exited: Callable[[], bool]) -> None:
    """Own a process group started by other means (e.g. a fork that called setpgid).

    Under `owning_children()` a signal then ends it with the others; `has_exited()` tells
    whether its leader has exited (it may reap it). Call `disown(pgid)` once it is reaped.
    """
    _OWNER.running[pgid] = has_exited


def raise_if_interrupted() -> None:
    """Raise Interrupted once a signal is ending the owned children.

    For runners that start children by other means (the warm worker): call it before a
    run starts and right after `own_group`, as `start_child` does.
    """
    _OWNER.raise_if_stopping()


def disown(pgid: int) -> None:
    """Stop owning the process group `pgid` (after the caller reaped its leader)."""
    _OWNER.running.pop(pgid, None)


@contextlib.contextmanager
def owning_children() -> Iterator[None]:
    """Within: SIGHUP, SIGINT or SIGTERM ends every owned child group, then raises Interrupted.

    Ending a group: SIGTERM to it, SIGKILL to what is left after GRACE_SECONDS. The signal
    handler does that in the main thread, then raises Interrupted there; children that
    other threads start or finish afterwards raise Interrupted too (queued work is thus
    cancelled). A second signal meanwhile is ignored, and after an interruption both
    signals stay ignored (SIG_IGN, also through interpreter exit): the process is expected
    to exit with `Interrupted.exit_status`.
    Leaving the block ends any child still owned. Nests; outside the main thread it only
    ends leftovers on exit. A signal this process ignores on entry stays ignored.
    """
    outermost = _OWNER.depth == 0
    in_main = threading.current_thread() is threading.main_thread()
    previous: dict[int, Any] = {}
    if outermost and in_main:  # a signal ignored at start (`cmd &` in a script) stays ignored
        previous = {
            number: signal.signal(number, _OWNER.on_signal)
            for number in _OWNED_SIGNALS
            if signal.getsignal(number) is not signal.SIG_IGN
        }
    _OWNER.depth += 1
    try:
        yield
    finally:
        _OWNER.depth -= 1
        if outermost:
            end_groups(list(_OWNER.running), grace=GRACE_SECONDS)
            interrupted = _OWNER.stopping is not None
            for number, handler in previous.items():
                signal.signal(number, signal.SIG_IGN if interrupted else handler)
            _OWNER.stopping = _OWNER.deferred = None


def end_groups(pgids: Iterable[int], *, grace: float) -> None:
    """SIGTERM to each process group, SIGKILL to those left after `grace` s (0: SIGKILL now)."""
    pgids = list(pgids)
    if grace > 0:
        for pgid in pgids:
            _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_group_alive(pgid) for pgid in pgids):
            time.sleep(0.02)
    for pgid in pgids:
        _signal_group(pgid, signal.SIGKILL)


@dataclass
class _Owner:
    """The process groups this process's children lead, and the signal being handled."""

    running: dict[int, Callable[[], bool]] = field(default_factory=dict)  # pgid -> exited?
    stopping: int | None = None  # the signal that is ending the children
    deferred: int | None = None  # a signal that came while the main thread started a child
    starting_depth: int = 0  # the main thread is inside start_child's critical section
    depth: int = 0  # nesting of owning_children()

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        """Around Popen + registration: the main thread's signal handler waits for its end."""
        in_main = threading.current_thread() is threading.main_thread()
        self.starting_depth += in_main
        try:
            yield
        finally:
            self.starting_depth -= in_main
            if in_main and self.starting_depth == 0 and self.deferred is not None:
                signum, self.deferred = self.deferred, None
                self.on_signal(signum, None)

    def raise_if_stopping(self) -> None:
        if self.stopping is not None:
            raise Interrupted(self.stopping)

    def on_signal(self, signum: int, _frame: object) -> None:
        if self.stopping is not None:
            return  # a second signal: the first one is already ending everything
        if self.starting_depth:
            self.deferred = signum
            return
        self.stopping = signum
        end_groups(list(self.running), grace=GRACE_SECONDS)
        raise Interrupted(signum)

    def reset_in_forked_child(self) -> None:
        """A forked child owns none of its parent's children and gets default handlers."""
        if self.depth and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
        self.running.clear()
        self.stopping = self.deferred = None
        self.starting_depth = self.depth = 0


_OWNER = _Owner()
os.register_at_fork(after_in_child=_OWNER.reset_in_forked_child)


def _has_exited(process: subprocess.Popen[str]) -> bool:
    return process.poll() is not None


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (zombies nobody reaps yet do not count)."""
    has_exited = _OWNER.running.get(pgid)
    if has_exited is not None and not has_exited():
        return True
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _group_has_live_member(pgid) if _PROC.is_dir() else True


def _group_has_live_member(pgid: int) -> bool:
    """From /proc: whether a process of group `pgid` is in a state other than zombie."""
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _foreground_terminal() -> int | None:
    """stdin's descriptor if it is a terminal whose foreground is this process's group."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        descriptor = sys.stdin.fileno()
        if os.isatty(descriptor) and os.tcgetpgrp(descriptor) == os.getpgrp():
            return descriptor
    except (AttributeError, OSError, ValueError):
        return None
    return None


def _give_terminal_to(pgid: int, descriptor: int) -> None:
    """Make `pgid` (0: the caller's) the terminal's foreground group, ignoring SIGTTOU meanwhile.

    Runs in the parent, and in the child between fork and exec, as shells do.
    """
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(descriptor, pgid or os.getpgrp())
    finally:
        signal.signal(signal.SIGTTOU, previous)

"""Run a command in a child process of its own group, with a timeout; classify how it ended."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from prtoggle.errors import RunnerError
from prtoggle.protocol import BOOTSTRAP_FAILURE_PREFIX, shell_status

PATCH_FAILURE_NAMES = ("PatchApplicationError", "TargetResolutionError", "UnsupportedTargetError")
"""Errors by which a child's start-up says a revert did not apply (bisect: skip)."""

ExitClass = Literal["good", "bad", "skip", "crash", "timeout"]

_EXCEPTION_LINE = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Detected|Violation|"
    r"Exit|Interrupt|Failed|Fault))(?::\s?(?P<message>.*))?$"
)
_TAIL_CHARS = 4000


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


def run_command(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    cwd: str | None = None,
) -> CommandRun:
    """Run `argv` to completion, capturing its output; kill its process group on timeout."""
    if not argv:
        raise RunnerError("no command given: expected a program and its arguments after `--`")
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            list(argv),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        raise RunnerError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from exc
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        returncode: int | None = process.returncode
    except subprocess.TimeoutExpired:
        _kill_group(process)
        stdout, stderr = process.communicate()
        returncode = None
    except BaseException:
        _kill_group(process)
        process.wait()
        raise
    return CommandRun(
        argv=tuple(argv),
        returncode=returncode,
        seconds=time.monotonic() - started,
        stdout=stdout,
        stderr=stderr,
        timeout=timeout,
    )


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


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)

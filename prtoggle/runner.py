"""Run a command or a reproduction scenario in a child process with a timeout; classify it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from prtoggle.errors import RunnerError

if TYPE_CHECKING:
    from prtoggle.registry import Fix

OUTCOME_PREFIX = "prtoggle-outcome: "
"""Last stderr line of a scenario child (the protocol of fixes/scenarios/common.py)."""

REVERT_ENV = "SGLANG_DEBUG_REVERT_PR"
DETECTION_ENV: Mapping[str, str] = {
    "SGLANG_SPEC_NAN_DETECTION": "1",
    "SGLANG_SPEC_OOB_DETECTION": "1",
    "SGLANG_DEBUG_POISON": "1",
}
"""Set for both runs of `prtoggle repro`, so a reverted failure is reported by name."""

BOOTSTRAP_FAILURE_PREFIX = "prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR"
"""How a child's start-up hook (prtoggle/_bootstrap) says it could not revert (bisect: skip)."""

PATCH_FAILURE_NAMES = ("PatchApplicationError", "TargetResolutionError", "UnsupportedTargetError")
"""Errors by which a child's start-up says a revert did not apply (bisect: skip)."""

ExitClass = Literal["good", "bad", "skip", "crash", "timeout"]
OutcomeKind = Literal["clean", "failure", "crash", "timeout"]

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
        return 128 - self.returncode if self.returncode < 0 else self.returncode


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario run, as the protocol line (or, without one, the exit status) tells it."""

    kind: OutcomeKind
    error: str | None
    site: str | None
    message: str
    seconds: float
    run: CommandRun

    @property
    def outcome(self) -> Literal["clean", "failure"]:
        return "clean" if self.kind == "clean" else "failure"

    def failure_text(self) -> str:
        """`<error> at <site>: <message>`, the text a fix's `expect` regex is matched against."""
        where = f" at {self.site}" if self.site else ""
        return f"{self.error}{where}: {self.message}"

    def describe(self) -> str:
        """A short cell for a table: `clean`, `NaNDetected at site`, `timeout after 60 s`."""
        if self.kind == "clean":
            return "clean"
        if self.kind == "timeout":
            return f"timeout after {self.run.timeout:g} s"
        where = f" at {self.site}" if self.site else ""
        return f"{self.error}{where}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "kind": self.kind,
            "error": self.error,
            "site": self.site,
            "message": self.message,
            "seconds": round(self.seconds, 3),
            "exit_code": self.run.returncode,
        }


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


def scenario_command(module: str, *, device: str, provider: str | None) -> list[str]:
    """`python -m <module> --device D [--provider P]` with this interpreter."""
    argv = [sys.executable, "-m", module, "--device", device]
    if provider is not None:
        argv += ["--provider", provider]
    return argv


def scenario_env(prs: Sequence[int], *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a scenario child: `prs` reverted (none: nothing), detection on."""
    env = dict(os.environ if base is None else base)
    env.pop(REVERT_ENV, None)
    if prs:
        from prtoggle.toggle import child_env

        env = child_env(tuple(prs), base=env)
    env.update(DETECTION_ENV)
    return env


def run_scenario(
    module: str,
    *,
    prs: Sequence[int] = (),
    device: str = "cpu",
    provider: str | None = None,
    timeout: float | None = None,
    base_env: Mapping[str, str] | None = None,
) -> ScenarioResult:
    """Run a scenario module in a child with `prs` reverted and classify what it reports."""
    argv = scenario_command(module, device=device, provider=provider)
    run = run_command(argv, env=scenario_env(prs, base=base_env), timeout=timeout)
    return classify_scenario(run, module=module)


def classify_scenario(run: CommandRun, *, module: str) -> ScenarioResult:
    """The protocol line's outcome, or one read from the exit status and stderr without it."""
    protocol = _protocol_line(run.stderr)
    if protocol is not None:
        return _from_protocol(protocol, run, module=module)
    if run.timed_out:
        return ScenarioResult(
            kind="timeout",
            error="Timeout",
            site=None,
            message=f"no outcome within {run.timeout:g} s; the child was killed",
            seconds=run.seconds,
            run=run,
        )
    error_type, message = last_exception(run.stderr)
    signal_name = run.signal_name
    if signal_name is not None:
        error_type = error_type or signal_name
        message = message or f"killed by {signal_name}"
    return ScenarioResult(
        kind="crash",
        error=error_type or "Crash",
        site=None,
        message=message or f"exited with status {run.returncode} without an outcome line",
        seconds=run.seconds,
        run=run,
    )


@dataclass(frozen=True)
class ReproResult:
    """A fix's scenario run with the fix (must be clean) and reverted (must fail as expected)."""

    pr: int
    module: str
    expect: str | None
    fixed: ScenarioResult
    reverted: ScenarioResult

    @property
    def reverted_matches(self) -> bool:
        """The reverted run failed, and `expect` (if any) matches its failure or its stderr."""
        if self.reverted.kind == "clean":
            return False
        if self.expect is None:
            return True
        pattern = re.compile(self.expect)
        return bool(
            pattern.search(self.reverted.failure_text()) or pattern.search(self.reverted.run.stderr)
        )

    @property
    def reproduced(self) -> bool:
        return self.fixed.kind == "clean" and self.reverted_matches

    @property
    def seconds(self) -> float:
        return self.fixed.seconds + self.reverted.seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "pr": self.pr,
            "scenario": self.module,
            "expect": self.expect,
            "reproduced": self.reproduced,
            "fixed": self.fixed.to_dict(),
            "reverted": self.reverted.to_dict(),
            "seconds": round(self.seconds, 3),
        }


def repro_fix(
    fix: Fix, *, device: str = "cpu", provider: str | None = None, timeout: float | None = None
) -> ReproResult:
    """Run the fix's scenario fixed and reverted, each in its own child with detection on."""
    if fix.repro is None:
        raise RunnerError(f"PR {fix.pr} has no repro scenario (no `repro:` in {fix.path})")
    options: dict[str, Any] = {"device": device, "provider": provider, "timeout": timeout}
    fixed = run_scenario(fix.repro, prs=(), **options)
    reverted = run_scenario(fix.repro, prs=(fix.pr,), **options)
    return ReproResult(
        pr=fix.pr, module=fix.repro, expect=fix.expect, fixed=fixed, reverted=reverted
    )


def output_tail(run: CommandRun, *, chars: int = _TAIL_CHARS) -> str:
    """The end of the child's stdout and stderr, for a diagnostic."""
    text = (run.stdout + run.stderr).rstrip()
    return text[-chars:]


def _protocol_line(stderr: str) -> str | None:
    for line in reversed(stderr.splitlines()):
        if line.startswith(OUTCOME_PREFIX):
            return line[len(OUTCOME_PREFIX) :]
    return None


def _from_protocol(payload: str, run: CommandRun, *, module: str) -> ScenarioResult:
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise RunnerError(
            f"scenario {module}: malformed outcome line {OUTCOME_PREFIX}{payload!r}: {exc}; "
            "expected a JSON object with outcome, error, site and message"
        ) from exc
    if not isinstance(data, dict) or data.get("outcome") not in ("clean", "failure"):
        raise RunnerError(
            f"scenario {module}: outcome line {payload!r} has no outcome 'clean' or 'failure'"
        )
    return ScenarioResult(
        kind="clean" if data["outcome"] == "clean" else "failure",
        error=data.get("error"),
        site=data.get("site"),
        message=str(data.get("message") or ""),
        seconds=run.seconds,
        run=run,
    )


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)

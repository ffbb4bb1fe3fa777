"""How `bisect --git` judges a run and a probe: good, bad (the regression) or other, by majority.

A run that exits 0 is good. A run that fails counts as the regression (bad) when it fails
the command's own way: a non-zero status below 128, not a timeout, not a crash (a signal:
an OOM kill), not a skip (status 125, or a revert that did not apply), and, with
`--fingerprint REGEX`, only when its output matches. Every other run is `other`, with the
reason. A probe's verdict is the majority of its runs; no majority, or a majority of
`other`, makes the probe inconclusive (skip).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from prtoggle.runners.child_outcome import classify_exit, last_exception
from prtoggle.runners.child_process import CommandRun

Verdict = Literal["good", "bad", "skip"]

_SUMMARY_LINE = re.compile(
    r"^(?:FAILED|ERROR) \S+(?: - (?:(?P<assertion>assert .*)|"
    r"(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Failed|Interrupt|Warning))"
    r"(?::\s?(?P<msg>.*))?|.*))?$"
)
_E_LINE = re.compile(
    r"^E\s+(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Failed|Interrupt)):?\s?(?P<msg>.*)$"
)


_CANNOT_IMPORT = re.compile(
    r"ImportError: cannot import name '(?P<name>[\w.]+)' from '(?P<module>[\w.]+)'"
    r"|ModuleNotFoundError: No module named '(?P<missing>[\w.]+)'"
)
_PYTEST_FRAME = re.compile(r"^(?P<file>\S+\.py):\d+: in ")
_PYTEST_LOCATION = re.compile(r"^(?P<file>\S+\.py):\d+: (?:ImportError|ModuleNotFoundError)$")
_PYTHON_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+\.py)", line \d+')


@dataclass(frozen=True)
class ImportSite:
    """A failed `from module import name` (or `import module`: name and module are the
    missing module), and the files of the traceback's frames down to it, outermost first."""

    name: str
    module: str
    frames: tuple[str, ...]


@dataclass(frozen=True)
class FailureRule:
    """What counts as the regression's failure: any failure of the command's own, or with
    `pattern` (--fingerprint) only one whose output matches it."""

    pattern: re.Pattern[str] | None = None

    def describe(self) -> str:
        if self.pattern is not None:
            return f"a failure whose output matches {self.pattern.pattern!r}"
        return "any failure of the command (not a timeout, crash or skip; --fingerprint narrows it)"


@dataclass(frozen=True)
class ProbeRun:
    """One run of a probe: its class (good, bad, other), failure signature, status, time."""

    outcome: Literal["good", "bad", "other"]
    signature: str
    exit_code: int | None
    seconds: float
    note: str = ""


def judge_run(done: CommandRun, rule: FailureRule) -> ProbeRun:
    """One finished run, judged under `rule`."""
    exit_class = classify_exit(done)
    seconds, code = done.seconds, done.returncode
    if exit_class == "good":
        return ProbeRun("good", "", code, seconds)
    if exit_class == "timeout":
        return ProbeRun("other", "timeout", code, seconds, f"killed after {done.timeout:g} s")
    if exit_class == "crash":
        return ProbeRun(
            "other", "crash", code, seconds, f"killed by {done.signal_name or 'a signal'}"
        )
    signature = failure_signature(done.stdout, done.stderr) or f"exit {code}"
    if exit_class == "skip":
        return ProbeRun("other", signature, code, seconds, f"skip: {signature}"[:300])
    if rule.pattern is not None and not rule.pattern.search(done.stdout + "\n" + done.stderr):
        return ProbeRun("other", signature, code, seconds, f"fails differently: {signature}"[:300])
    return ProbeRun("bad", signature, code, seconds)


def failure_signature(stdout: str, stderr: str) -> str:
    """`Type: first message line` of a failing run: pytest's short summary or `E` lines,
    else the last traceback line of stderr; '' when none is found."""
    for line in stdout.splitlines():
        found = _SUMMARY_LINE.match(line.strip())
        if found and found.group("type"):
            return _joined(found.group("type"), found.group("msg"))
        if found and found.group("assertion"):
            return _joined("AssertionError", found.group("assertion"))
    for line in (stdout + "\n" + stderr).splitlines():
        found = _E_LINE.match(line.strip())
        if found:
            return _joined(found.group("type"), found.group("msg"))
    error_type, message = last_exception(stderr)
    if error_type is None:
        error_type, message = last_exception(stdout)
    return _joined(error_type, message) if error_type else ""


def failed_import(output: str) -> ImportSite | None:
    """The first `ImportError: cannot import name N from M` (or `ModuleNotFoundError: No
    module named M`) of a run's output, with the files of the traceback's frames before it
    (pytest's `file:line: in` lines, Python's `File "...", line` lines) and pytest's location
    line after it (`file:line: ImportError`); None when there is none."""
    lines = output.splitlines()
    for number, line in enumerate(lines):
        found = _CANNOT_IMPORT.search(line)
        if found is None:
            continue
        frames = [
            frame["file"]
            for earlier in lines[:number]
            if (frame := _PYTEST_FRAME.match(earlier) or _PYTHON_FRAME.match(earlier))
        ]
        frames += [
            location["file"]
            for later in lines[number + 1 : number + 4]
            if (location := _PYTEST_LOCATION.match(later))
        ]
        if found["missing"]:
            return ImportSite(found["missing"], found["missing"], tuple(frames))
        return ImportSite(found["name"], found["module"], tuple(frames))
    return None


def settled(runs: Sequence[ProbeRun], repeat: int) -> bool:
    """Whether one outcome already holds a majority of `repeat` runs."""
    counts = Counter(run.outcome for run in runs)
    return counts.most_common(1)[0][1] * 2 > repeat


def majority(runs: Sequence[ProbeRun], repeat: int) -> tuple[Verdict, str]:
    """The probe's verdict from its runs, and why it is inconclusive ('' when it is not)."""
    counts = Counter(run.outcome for run in runs)
    outcome, count = counts.most_common(1)[0]
    if count * 2 > repeat and outcome != "other":
        return outcome, ""
    others = sorted({run.note or run.signature for run in runs if run.outcome == "other"})
    if count * 2 > repeat:
        return "skip", "; ".join(others)[:300]
    return "skip", f"no majority of {repeat}: {counts_text(runs)}" + (
        f" ({'; '.join(others)[:200]})" if others else ""
    )


def counts_text(runs: Sequence[ProbeRun]) -> str:
    """`2 bad, 1 good`: how many runs had each outcome."""
    counts = Counter(run.outcome for run in runs)
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))


def _joined(error_type: str | None, message: str | None) -> str:
    first = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    return f"{error_type}: {first}"[:200] if first else str(error_type)

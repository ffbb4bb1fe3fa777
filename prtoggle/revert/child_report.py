"""The parent's side of the run reports: collect what a command's processes report, judge it.

`prtoggle run` (and `bisect`, `coverage`) names a fresh directory in RUN_REPORT_ENV. Every
Python process of the command whose requested reverts are put in force writes `<pid>.json`
there (what it writes and when: prtoggle.revert.child). After the command ends the parent
reads them all: a run in which no process reported (the hook never ran: `python -I`/`-E`/
`-S`, a wrapper that sets its own PYTHONPATH, an interpreter the hook cannot run in), a
refusal, or a target imported and left unpatched is one line and status
RUN_NOT_REVERTED_EXIT_CODE instead of the command's (`bisect`: a skip; `coverage`: a run
that does not count).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from prtoggle.protocol import (
    BOOTSTRAP_FAILURE_EXIT_CODE,
    RUN_NOT_REVERTED_EXIT_CODE,
    RUN_REPORT_ENV,
)

_ISOLATING_FLAGS = {"I": "-I", "E": "-E", "S": "-S"}


@dataclass(frozen=True)
class ProcessReport:
    """One process's last report: its state, its refusal, per PR the targets left unpatched."""

    pid: int
    argv: tuple[str, ...]
    state: str
    error: str = ""
    unapplied: Mapping[int, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """The status `prtoggle run` exits with, and the line it prints first (None: all landed)."""

    status: int
    line: str | None = None


@contextmanager
def collecting_reports(env: Mapping[str, str]) -> Iterator[tuple[dict[str, str], Path]]:
    """A copy of `env` naming a fresh report directory, and that directory (removed after)."""
    with tempfile.TemporaryDirectory(prefix="prtoggle-run-") as directory:
        yield {**env, RUN_REPORT_ENV: directory}, Path(directory)


def read_reports(directory: Path) -> list[ProcessReport]:
    """Every complete report in `directory`, by pid."""
    reports = []
    for path in sorted(directory.glob("*.json")):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        unapplied = {int(pr): tuple(t) for pr, t in (raw.get("unapplied") or {}).items()}
        reports.append(
            ProcessReport(
                pid=int(raw.get("pid", 0)),
                argv=tuple(str(arg) for arg in raw.get("argv") or ()),
                state=str(raw.get("state", "")),
                error=str(raw.get("error", "")),
                unapplied=unapplied,
            )
        )
    return sorted(reports, key=lambda report: report.pid)


def verdict(
    prs: Sequence[int], reports: Sequence[ProcessReport], *, command: Sequence[str], status: int
) -> Verdict:
    """Whether the reverts of `prs` landed in the command's processes; the status to exit with.

    The command's own status when they did (or nothing was requested, or the command
    passed on its start-up hook's refusal, status and line); otherwise
    RUN_NOT_REVERTED_EXIT_CODE and one line saying what did not land, and where.
    """
    reason = not_landed(prs, reports, command=command)
    passed_on = status == BOOTSTRAP_FAILURE_EXIT_CODE and any(
        report.state == "refused" for report in reports
    )
    if reason is None or passed_on:
        return Verdict(status=status)
    return Verdict(
        status=RUN_NOT_REVERTED_EXIT_CODE,
        line=f"prtoggle run: {reason}; the command exited {status}, prtoggle run exits "
        f"{RUN_NOT_REVERTED_EXIT_CODE}",
    )


def not_landed(
    prs: Sequence[int], reports: Sequence[ProcessReport], *, command: Sequence[str]
) -> str | None:
    """Why the reverts of `prs` did not land in the processes of `command` (None: they did).

    No process reported, one refused, or one imported a target and never patched it.
    """
    if not prs:
        return None
    named = f"PR {prs[0]}" if len(prs) == 1 else "PRs " + ", ".join(map(str, prs))
    if not reports:
        return f"{named} not reverted: {_why_silent(command)}"
    refused = [report for report in reports if report.state == "refused"]
    if refused:
        error = (refused[0].error.splitlines() or ["(no message)"])[0]  # the rest: on stderr
        return f"{named} not reverted in {_process(refused[0])}: {error}"
    for report in reports:
        for pr, targets in sorted(report.unapplied.items()):
            return (
                f"PR {pr} never reverted in {_process(report)}: {', '.join(targets)} imported "
                "and not patched"
            )
    return None


def _why_silent(command: Sequence[str]) -> str:
    flag = _isolating_flag(command)
    if flag is not None:
        return (
            f"`{Path(command[0]).name} {flag}` ignores PYTHONPATH or site, so prtoggle's "
            "start-up hook never ran in it (drop the flag, or call "
            "prtoggle.maybe_revert_pr_fix() in the program)"
        )
    return (
        "no Python process of the command ran prtoggle's start-up hook (a Python started with "
        "-I, -E or -S, a script that sets its own PYTHONPATH, a Python the hook cannot run in, "
        "or no Python at all)"
    )


def _isolating_flag(command: Sequence[str]) -> str | None:
    """`-I`, `-E` or `-S` when COMMAND is a Python started with one of them, else None."""
    if not command or not Path(command[0]).name.startswith("python"):
        return None
    arguments = iter(command[1:])
    for arg in arguments:
        if not arg.startswith("-") or arg.startswith("--") or arg == "-":
            return None
        for index, letter in enumerate(arg[1:], start=1):
            if letter in _ISOLATING_FLAGS:
                return _ISOLATING_FLAGS[letter]
            if letter in "cm":  # what follows is the program
                return None
            if letter in "XWQ":  # what follows (here or next) is the option's value
                if index == len(arg) - 1:
                    next(arguments, None)
                break
    return None


def _process(report: ProcessReport) -> str:
    shown = " ".join(report.argv).replace("\r", "\\r").replace("\n", "\\n")
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return f"process {report.pid} ({shown})"

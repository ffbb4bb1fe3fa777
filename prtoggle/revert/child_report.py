"""The parent's side of the run reports: collect what a command's processes report, judge it.

`prtoggle run` (and `bisect`, `coverage`) names a fresh directory in RUN_REPORT_ENV. Every
Python process of the command whose requested reverts are put in force writes `<pid>.json`
there (what it writes and when: prtoggle.revert.process_report). After the command ends the parent
reads them all: a run in which no process reported (the hook never ran: `python -I`/`-E`/
`-S`, a wrapper that sets its own PYTHONPATH, an interpreter the hook cannot run in), a
refusal, or a target imported and left unpatched is one line and status
RUN_NOT_REVERTED_EXIT_CODE instead of the command's (`bisect`: a skip; `coverage`: a run
that does not count).
"""

from __future__ import annotations

import json
import os
import shutil
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
    """One process's last report: its state, its refusal, per PR its recipes (`recipes`),
    those with code patched (`landed`) and the targets imported but left unpatched."""

    pid: int
    argv: tuple[str, ...]
    state: str
    error: str = ""
    unapplied: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    recipes: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    landed: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    waiting: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # module never imported
    execed: tuple[str, ...] = ()  # state "exec": the program it was replacing itself with


@dataclass(frozen=True)
class Verdict:
    """The status `prtoggle run` exits with, and its one line on stderr (None: nothing to say).

    The line says what did not land, or else where the reverts were in force (summary).
    """

    status: int
    line: str | None = None


@contextmanager
def collecting_reports(env: Mapping[str, str]) -> Iterator[tuple[dict[str, str], Path]]:
    """A copy of `env` naming a fresh report directory, and that directory (removed after).

    Processes that outlive the command (multiprocessing's resource tracker, a daemon) may
    still write when it is removed: the directory is first renamed out of their reach (a
    late write then fails, quietly), then deleted; whatever they do, it never stays.
    """
    directory = Path(tempfile.mkdtemp(prefix="prtoggle-run-"))
    try:
        yield {**env, RUN_REPORT_ENV: str(directory)}, directory
    finally:
        _remove_late_written(directory)


def read_reports(directory: Path) -> list[ProcessReport]:
    """Every complete, well-formed report in `directory`, by pid (anything else is ignored)."""
    reports = []
    for path in sorted(directory.glob("*.json")):
        try:
            report = _parsed(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
        if report is not None:
            reports.append(report)
    return sorted(reports, key=lambda report: report.pid)


def forward_reports(directory: Path, *, to: Path) -> None:
    """Copy every report of `directory` into `to`, an outer run's report directory.

    A `prtoggle run` inside another (or inside `bisect`, `coverage`) passes on what its
    command's processes said, so the outer verdict is about the processes that ran the
    program, not only the inner `prtoggle` process. A write that fails is left out quietly.
    """
    for path in sorted(directory.glob("*.json")):
        temporary = to / f".{path.name}.{os.getpid()}.tmp"
        try:
            shutil.copyfile(path, temporary)
            os.replace(temporary, to / path.name)
        except OSError:
            continue


def verdict(
    prs: Sequence[int], reports: Sequence[ProcessReport], *, command: Sequence[str], status: int
) -> Verdict:
    """Whether the reverts of `prs` landed in the command's processes; the status to exit with.

    The command's own status when they did (with the summary line), or nothing was
    requested, or the command passed on its start-up hook's refusal, status and line;
    otherwise RUN_NOT_REVERTED_EXIT_CODE and one line saying what did not land, and where.
    """
    reason = not_landed(prs, reports, command=command)
    passed_on = status == BOOTSTRAP_FAILURE_EXIT_CODE and any(
        report.state == "refused" for report in reports
    )
    if passed_on:
        return Verdict(status=status)
    if reason is None:
        said = summary(prs, reports)
        return Verdict(status=status, line=None if said is None else f"prtoggle run: {said}")
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
    named = _named(prs)
    if not reports:
        return f"{named} not reverted: {_why_silent(command)}"
    refused = [report for report in reports if report.state == "refused"]
    if refused:
        error = (refused[0].error.splitlines() or ["(no message)"])[0]  # the rest: on stderr
        return f"{named} not reverted in {_process(refused[0])}: {error}"
    execed = [r for r in reports if r.state == "exec" and _is_python(r.execed)]
    if execed:
        program = " ".join(execed[0].execed)
        return (
            f"{named} not reverted in {_process(execed[0])}: it exec'd `{_cut(program)}`, a "
            "Python that never reported (its options or environment kept prtoggle's start-up "
            "hook out)"
        )
    for report in reports:
        for pr, targets in sorted(report.unapplied.items()):
            return (
                f"PR {pr} never reverted in {_process(report)}: {', '.join(targets)} imported "
                "and not patched"
            )
    return None


def summary(prs: Sequence[int], reports: Sequence[ProcessReport]) -> str | None:
    """Where `prs` were in force, in one phrase; None when no process reported them.

    `PR 27460 in force in 3 processes (sglang/27460)`: the processes that put them in force
    and the recipes whose code was patched in at least one of them. A recipe none of them
    imported is said to be not reverted, never "in force".
    """
    holding = [r for r in reports if r.state != "refused" and any(pr in r.recipes for pr in prs)]
    if not prs or not holding:
        return None
    named = _named(prs)
    processes = f"{len(holding)} process" + ("" if len(holding) == 1 else "es")
    recipes = _labels(holding, prs, landed=False)
    landed = [label for label in _labels(holding, prs, landed=True) if label in recipes]
    idle = [label for label in recipes if label not in landed]
    if not landed:
        return (
            f"{named} requested in {processes}, but no process imported its code, so "
            f"nothing was reverted ({_shortened(idle)})"
        )
    said = f"{named} in force in {processes} ({', '.join(landed)})"
    if idle:
        said = f"{said}; never imported, so not reverted: {_shortened(idle)}"
    waiting = _waiting_everywhere(holding, prs)
    return f"{said}; not imported, so not yet in force: {_shortened(waiting)}" if waiting else said


def never_imported(pr: int, reports: Sequence[ProcessReport]) -> bool:
    """Whether no process landed a recipe of `pr` and at least one reported its exit with
    `pr` still in force: the command never imported the fix's code, so its run says nothing
    about the fix. A process that landed one writes so at once; one still running when the
    command ended (multiprocessing's resource tracker, a daemon) or killed, that reported
    no landing, patched nothing: it does not make the answer depend on when it exits. A
    process that released `pr` before its exit (a pytest session's own revert) leaves it
    unknown (False)."""
    exited = [report for report in reports if report.state == "exited"]
    if not exited or any(pr not in report.recipes for report in exited):
        return False
    return not any(report.landed.get(pr) for report in reports)


def _waiting_everywhere(reports: Sequence[ProcessReport], prs: Sequence[int]) -> list[str]:
    """Parts of landed recipes of `prs` (`names of SCOPE`, targets) that every process where
    they landed still waited for when it last reported: their module was never imported."""
    reports = [r for r in reports if any(r.landed.get(pr) for pr in prs)]
    per_report = [{item for pr in prs for item in r.waiting.get(pr, ())} for r in reports]
    common = set.intersection(*per_report) if per_report else set()
    ordered = [item for pr in prs for item in reports[0].waiting.get(pr, ())] if reports else []
    return [item for item in dict.fromkeys(ordered) if item in common]


def _labels(reports: Sequence[ProcessReport], prs: Sequence[int], *, landed: bool) -> list[str]:
    """The recipes of `prs` over `reports` (those patched somewhere with `landed`), in order."""
    per_pr = [(r.landed if landed else r.recipes).get(pr, ()) for pr in prs for r in reports]
    return list(dict.fromkeys(label for labels in per_pr for label in labels))


def _shortened(labels: Sequence[str], *, shown: int = 6) -> str:
    more = len(labels) - shown
    return ", ".join(labels[:shown]) + (f" and {more} more" if more > 0 else "")


def _named(prs: Sequence[int]) -> str:
    return f"PR {prs[0]}" if len(prs) == 1 else "PRs " + ", ".join(map(str, prs))


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
    return f"process {report.pid} ({_cut(' '.join(report.argv))})"


def _cut(shown: str) -> str:
    shown = shown.replace("\r", "\\r").replace("\n", "\\n")
    return shown[:77] + "..." if len(shown) > 80 else shown


def _is_python(argv: Sequence[str]) -> bool:
    return bool(argv) and Path(argv[0]).name.startswith("python")


def _remove_late_written(directory: Path) -> None:
    """Delete the report directory although late processes may still write into it.

    Writers only ever reach it by its name (write_run_report: a temporary file, then a
    rename into place); after the rename here no new entry can appear in it.
    """
    out_of_reach = directory.with_name(f"{directory.name}.done")
    try:
        os.rename(directory, out_of_reach)
    except OSError:
        out_of_reach = directory
    for _attempt in range(5):
        shutil.rmtree(out_of_reach, ignore_errors=True)
        if not out_of_reach.exists():
            return


def _parsed(raw: object) -> ProcessReport | None:
    """A report as `prtoggle.revert.process_report` writes it, or None for anything else."""
    if not isinstance(raw, dict):
        return None
    pid, state = raw.get("pid"), raw.get("state")
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(state, str):
        return None
    argv, execed = raw.get("argv"), raw.get("exec")
    return ProcessReport(
        pid=pid,
        argv=tuple(str(arg) for arg in argv) if isinstance(argv, list) else (),
        state=state,
        error=str(raw.get("error") or ""),
        unapplied=_per_pr(raw.get("unapplied")),
        recipes=_per_pr(raw.get("recipes")),
        landed=_per_pr(raw.get("landed")),
        waiting=_per_pr(raw.get("waiting")),
        execed=tuple(str(arg) for arg in execed) if isinstance(execed, list) else (),
    )


def _per_pr(raw: object) -> dict[int, tuple[str, ...]]:
    """`{"27460": ["a", "b"]}` -> {27460: ("a", "b")}; entries of any other shape left out."""
    if not isinstance(raw, dict):
        return {}
    return {
        int(pr): tuple(str(item) for item in items)
        for pr, items in raw.items()
        if isinstance(pr, str) and pr.isascii() and pr.isdigit() and isinstance(items, list)
    }

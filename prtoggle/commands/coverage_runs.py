"""One pytest run of `prtoggle coverage`: started, its report read, and why it may not count.

The run is a child told, through the prtoggle pytest plugin's options, to write every
test's outcome as JSON (`prtoggle.pytest_plugin.outcomes`) and to run guards_pr tests
plain; its output is only read to say why it wrote no report. The plain run goes first:
the reverted runs start once its pytest session has started (the plugin is loaded and its
options understood), and never when it wrote no report.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from prtoggle.protocol import (
    BOOTSTRAP_FAILURE_EXIT_CODE,
    BOOTSTRAP_FAILURE_PREFIX,
    REVERT_ENV,
    RUN_REPORT_ENV,
)
from prtoggle.pytest_plugin.outcomes import (
    NO_VARIANTS_OPTION,
    REPORT_OPTION,
    NodeOutcome,
    PytestReport,
    read_report,
    report_options,
    started_marker,
)
from prtoggle.revert import child_report
from prtoggle.revert.toggle import child_env
from prtoggle.runners.child_outcome import PATCH_FAILURE_NAMES, output_tail
from prtoggle.runners.child_process import CommandRun, run_child
from prtoggle.runners.warm_client import CommandRunner


@dataclass(frozen=True)
class SuiteRun:
    """One run of the pytest command: the PRs it reverted and each test's outcome.

    `error` says why a run has no outcomes (a crash, a timeout, a revert that did not
    apply); `collect_errors` the collectors that failed (a module that does not import).
    `started`: False for a reverted run never started because the plain run failed.
    `never_imported`: every process of the run reported its exit and none patched a target
    of its PRs (the suite never imports the fix's code): its outcomes say nothing of it.
    """

    prs: tuple[int | str, ...]
    outcomes: Mapping[str, NodeOutcome]
    collect_errors: Mapping[str, str]
    seconds: float
    exit_code: int | None
    error: str | None = None
    started: bool = True
    plugin_missing: bool = False
    never_imported: bool = False


def reverts_text(prs: Sequence[int | str]) -> str:
    """`90002 (registry), 26521` for ("registry:90002", 26521): how messages name reverts."""
    parts = []
    for spec in prs:
        collection, _, pr = str(spec).rpartition(":")
        parts.append(f"{pr} ({collection})" if collection else pr)
    return ", ".join(parts)


def run_suite(
    command: Sequence[str],
    *,
    prs: tuple[int | str, ...],
    timeout: float,
    runner: CommandRunner | None = None,
    on_started: Callable[[], None] | None = None,
    keep: str | None = None,
    base_env: Mapping[str, str] | None = None,
) -> SuiteRun:
    """Run the pytest command once with `prs` (N or `C:N`) reverted at start-up.

    `on_started` is called (from another thread) once the run's pytest session has started:
    the plugin is loaded and its options understood. `keep`: an outer prtoggle run's
    SGLANG_DEBUG_REVERT_PR, in force too (what the run's processes report is passed on to
    that run). `base_env`: the environment to start from (default: this process's).
    """
    start = os.environ if base_env is None else base_env
    base = {key: value for key, value in start.items() if key != REVERT_ENV}
    specs = (*([keep] if keep else []), *prs)
    env = child_env(specs, base=base) if specs else base
    outer_reports = os.environ.get(RUN_REPORT_ENV) if keep else None
    with tempfile.TemporaryDirectory(prefix="prtoggle-coverage-") as directory:
        report_path = Path(directory) / "report.json"
        argv = [*command, *report_options(report_path), "--continue-on-collection-errors"]
        with (
            child_report.collecting_reports(env) as (env, landing),
            _watching(started_marker(report_path), on_started),
        ):
            run = (runner or run_child)(argv, env=env, timeout=timeout)
            numbers = tuple(int(str(spec).rpartition(":")[2]) for spec in prs)
            reports = child_report.read_reports(landing)
            if outer_reports:
                child_report.forward_reports(landing, to=Path(outer_reports))
            not_landed = child_report.not_landed(numbers, reports, command=command)
            never = bool(numbers) and all(child_report.never_imported(n, reports) for n in numbers)
        if run.timed_out:
            error: str | None = f"timed out after {timeout:g} s"
        elif not report_path.exists():
            missing = _plugin_missing(run, command)
            if missing is not None:
                return SuiteRun(
                    prs, {}, {}, run.seconds, run.returncode, missing, plugin_missing=True
                )
            error = _no_report_error(run, prs)
        else:
            error = not_landed  # e.g. `python -I -m pytest`: its answers are the fixed code's
        report = read_report(report_path) if error is None else None
    if report is not None:
        error = _patch_failure(report, prs)
    return SuiteRun(
        prs=prs,
        outcomes=report.tests if report and error is None else {},
        collect_errors=report.collect_errors if report and error is None else {},
        seconds=run.seconds,
        exit_code=run.returncode,
        error=error,
        never_imported=never and error is None,
    )


@dataclass
class PlainGate:
    """Reverted runs start once the plain run's pytest session has started (the plugin is
    loaded, its options understood), and not at all when the plain run wrote no report."""

    opened: threading.Event = field(default_factory=threading.Event)
    plain_failed: bool = False

    def plain(self, task: Callable[[], SuiteRun]) -> Callable[[], SuiteRun]:
        def run() -> SuiteRun:
            failed = True
            try:
                done = task()
                failed = done.error is not None
                return done
            finally:  # when its session's start opened the gate, the others run already
                if not self.opened.is_set():
                    self.plain_failed = failed
                self.opened.set()

        return run

    def after_plain(
        self, prs: tuple[int | str, ...], task: Callable[[], SuiteRun]
    ) -> Callable[[], SuiteRun]:
        def run() -> SuiteRun:
            self.opened.wait()
            if self.plain_failed:
                return SuiteRun(prs, {}, {}, 0.0, None, "not run: the plain run failed", False)
            return task()

        return run


@contextmanager
def _watching(marker: Path, on_found: Callable[[], None] | None) -> Iterator[None]:
    """Within: a thread calls `on_found` once `marker` exists (polled every 50 ms)."""
    if on_found is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            if marker.exists():
                on_found()
                return

    watcher = threading.Thread(target=watch, name="prtoggle-coverage-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _plugin_missing(run: CommandRun, command: Sequence[str]) -> str | None:
    """The one-line error when pytest did not know the plugin's options (plugin not loaded)."""
    for line in reversed(output_tail(run).splitlines()):
        if "unrecognized arguments:" in line and (
            NO_VARIANTS_OPTION in line or REPORT_OPTION in line
        ):
            return (
                f"the prtoggle pytest plugin is not loaded in `{shlex.join(command)}` (pytest: "
                f"unrecognized arguments: {NO_VARIANTS_OPTION} {REPORT_OPTION}); drop "
                "`-p no:prtoggle`, or add `-p prtoggle.pytest_plugin` where "
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD is set"
            )
    return None


def _no_report_error(run: CommandRun, prs: tuple[int | str, ...]) -> str:
    """Why a run wrote no report: the start-up hook refused a revert, or the last line."""
    lines = output_tail(run).splitlines()
    refused = [line for line in lines if line.startswith(f"{BOOTSTRAP_FAILURE_PREFIX}: ")]
    if run.returncode == BOOTSTRAP_FAILURE_EXIT_CODE and refused:
        reason = refused[-1][len(BOOTSTRAP_FAILURE_PREFIX) + 2 :]
        return f"the revert of PR {reverts_text(prs)} did not apply: {reason}"
    last = lines[-1:] or ["no output"]
    return f"exit status {run.returncode}, no report; last line: {last[0]}"


def _patch_failure(report: PytestReport, prs: tuple[int | str, ...]) -> str | None:
    """Why the run does not count: a revert that failed to apply (seen in any error)."""
    errors = [o.error for o in report.tests.values() if o.error] + [*report.collect_errors.values()]
    for error in errors:
        type_name = error.split(":", 1)[0].strip().rsplit(".", 1)[-1]
        if type_name in PATCH_FAILURE_NAMES:
            first_line = error.splitlines()[0]
            return f"the revert of PR {reverts_text(prs)} did not apply: {first_line}"
    return None

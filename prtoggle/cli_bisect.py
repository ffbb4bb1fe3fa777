"""`prtoggle bisect`: find the fix(es) a command's failure depends on, like `git bisect run`."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from prtoggle.bisect import MODES, BisectResult, Mode, Verdict, run_search
from prtoggle.cli_support import (
    EXIT_NEGATIVE,
    check_without_import,
    echo_json,
    join_prs,
    load_default_registry,
    parse_revert_options,
)

if TYPE_CHECKING:
    from prtoggle.child_process import CommandRun, ExitClass

_EPILOG = """\b
COMMAND's exit status is read like `git bisect run`: 0 good, 125 skip, other
1..127 bad. A crash (signal, status above 127) counts as bad and a timeout as
skip, unless --crash-as/--timeout-as say so; both are reported, never fatal.
A candidate whose revert does not apply to the current code (checked first,
without importing it) is a skip: it is left out of the search. A run whose
child reports a PatchApplicationError at start-up is a skip too.

\b
Modes:
  attribute  baseline must be good; revert each candidate alone; culprits are
             those that turn the run bad (N+1 runs).
  ordered    candidates by merge date; find the fix k such that reverting k and
             every newer fix is bad but only the newer ones is good
             (at most ceil(log2 N)+2 runs, sanity runs included).
  ddmin      shrink the failing all-reverted set to a 1-minimal failing set
             (finds fixes that only fail together).

\b
Exit status: 0 a culprit was found; 1 none (or only a suspect range); 2 error.

\b
Examples:
  prtoggle bisect -- pytest -q tests/regression/test_pr26521_draft_decode_capture.py
  prtoggle bisect --mode ddmin -r 24856,26521,27460 -- python app.py
  prtoggle bisect --mode ordered --timeout 600 --json -- ./run_eval.sh
"""


@dataclass(frozen=True)
class RunRecord:
    """One bisect run as printed: the reverted set, its class, verdict, status and time."""

    reverted: tuple[int, ...]
    exit_class: str
    verdict: Verdict
    exit_code: int | None
    seconds: float
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "reverted": list(self.reverted),
            "class": self.exit_class,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "note": self.note,
        }

    def line(self, number: int) -> str:
        status = f"exit {self.exit_code}" if self.exit_code is not None else "no exit status"
        shown = (
            self.exit_class
            if self.exit_class == self.verdict
            else (f"{self.exit_class}, counted {self.verdict}")
        )
        detail = f" - {self.note}" if self.note else ""
        return (
            f"run {number}: reverted {join_prs(self.reverted)} -> {shown} "
            f"({status}, {self.seconds:.1f} s){detail}"
        )


@click.command(
    "bisect",
    epilog=_EPILOG,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--mode", type=click.Choice(MODES), default="attribute", show_default=True)
@click.option(
    "-r",
    "--candidates",
    "candidate_specs",
    multiple=True,
    metavar="SPEC",
    help="Candidate PRs (`26521,24856`, `all`; repeatable) [default: all registered].",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds each run may take before it is killed [default: no limit].",
)
@click.option("--crash-as", type=click.Choice(["bad", "skip"]), default="bad", show_default=True)
@click.option("--timeout-as", type=click.Choice(["bad", "skip"]), default="skip", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def bisect_command(
    *,
    mode: Mode,
    candidate_specs: tuple[str, ...],
    timeout: float | None,
    crash_as: Verdict,
    timeout_as: Verdict,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Find which fix(es) COMMAND needs: run it with sets of fixes reverted."""
    registry = load_default_registry()
    chosen = set(parse_revert_options(candidate_specs, registry) or registry.prs())
    candidates = [fix for fix in registry.by_merge_date() if fix.pr in chosen]
    checks = check_without_import(registry, candidates)
    broken = {pr: results for pr, results in checks.items() if not all(c.ok for c in results)}
    echo = _progress_echo(as_json)
    for pr, results in broken.items():
        reason = "; ".join(f"{c.target}: {c.message}" for c in results if not c.ok)
        echo(f"skip: PR {pr} is left out, its revert does not apply: {reason}")
    records: list[RunRecord] = []
    oracle = _command_oracle(
        list(command),
        timeout=timeout,
        counts={"crash": crash_as, "timeout": timeout_as},
        on_run=lambda record: _record(records, record, echo),
    )
    usable = [fix.pr for fix in candidates if fix.pr not in broken]
    result = run_search(mode, usable, oracle)
    if as_json:
        echo_json(_result_record(result, records, not_applicable=sorted(broken)))
    else:
        _print_answer(result)
    if not result.found:
        sys.exit(EXIT_NEGATIVE)


def _command_oracle(
    argv: list[str],
    *,
    timeout: float | None,
    counts: Mapping[str, Verdict],
    on_run: Callable[[RunRecord], None],
) -> Callable[[tuple[int, ...]], Verdict]:
    from prtoggle.child_process import classify_exit, run_command
    from prtoggle.protocol import REVERT_ENV

    base = {key: value for key, value in os.environ.items() if key != REVERT_ENV}

    def oracle(reverted: tuple[int, ...]) -> Verdict:
        run = run_command(argv, env=_env_for(reverted, base), timeout=timeout)
        exit_class = classify_exit(run)
        verdict = _verdict(exit_class, counts)
        on_run(
            RunRecord(
                reverted, exit_class, verdict, run.returncode, run.seconds, _note(run, exit_class)
            )
        )
        return verdict

    return oracle


def _verdict(exit_class: ExitClass, counts: Mapping[str, Verdict]) -> Verdict:
    if exit_class == "good" or exit_class == "bad" or exit_class == "skip":  # noqa: PLR1714
        return exit_class
    return counts[exit_class]


def _env_for(reverted: Sequence[int], base: dict[str, str]) -> dict[str, str]:
    if not reverted:
        return dict(base)
    from prtoggle.toggle import child_env

    return child_env(tuple(reverted), base=base)


def _note(run: CommandRun, exit_class: ExitClass) -> str:
    from prtoggle.child_process import last_exception

    if exit_class == "timeout":
        return f"killed after {run.timeout:g} s"
    if exit_class == "crash" and run.signal_name:
        return f"killed by {run.signal_name}"
    if exit_class in ("skip", "crash") and run.returncode != 125:
        error_type, message = last_exception(run.stderr)
        if error_type:
            return f"{error_type}: {message}"[:200]
    return ""


def _record(records: list[RunRecord], record: RunRecord, echo: Callable[[str], None]) -> None:
    records.append(record)
    echo(record.line(len(records)))


def _progress_echo(as_json: bool) -> Callable[[str], None]:
    def echo(text: str) -> None:
        click.echo(text, err=as_json)

    return echo


def _print_answer(result: BisectResult) -> None:
    if result.found:
        label = "culprit" if len(result.culprits) == 1 else "culprits"
        click.echo(f"{label}: {join_prs(result.culprits)} ({result.mode}, {result.runs} runs)")
    else:
        click.echo(f"no culprit found ({result.mode}, {result.runs} runs)")
    click.echo(result.conclusion)
    if result.skipped:
        click.echo(f"skipped: {join_prs(result.skipped)}")


def _result_record(
    result: BisectResult, records: Sequence[RunRecord], *, not_applicable: list[int]
) -> dict[str, Any]:
    return {
        "mode": result.mode,
        "found": result.found,
        "culprits": list(result.culprits),
        "conclusion": result.conclusion,
        "runs": result.runs,
        "skipped": list(result.skipped),
        "not_applicable": not_applicable,
        "probes": [record.to_dict() for record in records],
    }

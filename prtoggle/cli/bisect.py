"""`prtoggle bisect`: find the fix(es) a command's failure depends on, like `git bisect run`."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from prtoggle.cli.bisect_history import HISTORY_EPILOG, HISTORY_EXAMPLE, history_bisect
from prtoggle.cli.common import EXIT_NEGATIVE, echo_json, echo_notes, whole_only_option
from prtoggle.cli.output import plural
from prtoggle.commands.bisect_runs import MetricRule, RunRecord, bisect_plan, run_bisect
from prtoggle.commands.bisect_search import MODES, BisectResult, Mode, Verdict
from prtoggle.recipes.prs import join_prs

_EPILOG = """\b
COMMAND's exit status is read like `git bisect run`: 0 good, 125 skip, other
1..127 bad. A crash (signal, status above 127) counts as bad and a timeout as
skip, unless --crash-as/--timeout-as say so; both are reported, never fatal.
A candidate whose revert does not apply to the current code (checked first,
without importing it) is a skip: it is left out of the search. A recipe outside
its applies_to range, whose package is absent, or an upstream text a
maintained recipe replaces, is absent from the search (never a conflict). A run whose
child reports a PatchApplicationError at start-up is a skip too, and so is a
run in which the reverts never landed (no Python process of COMMAND ran the
start-up hook: python -I/-E/-S, a wrapper's own PYTHONPATH). A set of
reverts that cannot apply together (two recipes edit one line; checked on the
source files before running) is a conflict: a skip that names the recipes;
when it is the all-reverted set, ordered and ddmin answer "inconclusive".

\b
With --metric REGEX --threshold X, a run that exited is judged by a number:
REGEX's first group (or whole match) in its last match in stdout, else
stderr; good when >= X (<= X with --lower-is-better). A run whose output has
no match is a skip ("no metric"). --json carries each run's metric.
A run is over when COMMAND's own process exits (what it left running in the
background is ended); bisect keeps the last 1 MiB of each output stream.

\b
Python commands (python -m M / SCRIPT / -c CODE) run in children forked from
a warm worker that imported the engine once; --cold (or PRTOGGLE_WARM=0)
starts each run as a fresh process. Other commands are plain children.

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
  prtoggle bisect --metric 'accuracy: ([0-9.]+)' --threshold 0.9 -- python eval.py
"""


@click.command(
    "bisect",
    epilog=_EPILOG.replace("\b\nExit status:", HISTORY_EPILOG + "\n\b\nExit status:").replace(
        "  prtoggle bisect --metric", HISTORY_EXAMPLE + "  prtoggle bisect --metric"
    ),
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default=None,
    help="The search [default: attribute; ordered with --git].",
)
@click.option(
    "-r",
    "--candidates",
    "candidate_specs",
    multiple=True,
    metavar="SPEC",
    help="Candidate PRs (`26521,24856`, `sglang:27460`, `all`; repeatable) "
    "[default: every recipe that applies here].",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds each run may take before it is killed [default: no limit].",
)
@click.option("--crash-as", type=click.Choice(["bad", "skip"]), default="bad", show_default=True)
@click.option("--timeout-as", type=click.Choice(["bad", "skip"]), default="skip", show_default=True)
@click.option(
    "--metric",
    metavar="REGEX",
    default=None,
    help="Judge each run by a number in its output: REGEX's first group (or whole match).",
)
@click.option(
    "--threshold",
    type=float,
    default=None,
    help="With --metric: a run is good when the number is at or above X.",
)
@click.option(
    "--lower-is-better",
    is_flag=True,
    help="With --metric: good when the number is at or below the threshold.",
)
@click.option(
    "--cold",
    is_flag=True,
    help="Start every run as a fresh process (no warm worker; also PRTOGGLE_WARM=0).",
)
@click.option(
    "--git",
    "git_range",
    metavar="A..B",
    default=None,
    help="Bisect commits of git history instead of fixes: first-parent commits of A..B.",
)
@click.option(
    "--repo",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="With --git: the repository holding the range [default: the working directory].",
)
@click.option(
    "--source-dir",
    metavar="DIR",
    default=None,
    help="With --git: the repository's folder holding the package sources "
    "[default: python when the repository has it, else its top].",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1, max=99),
    default=1,
    show_default=True,
    help="With --git: runs per probe; the majority decides.",
)
@click.option(
    "--fingerprint",
    metavar="REGEX",
    default=None,
    help="With --git: a failing run counts only when its output matches REGEX "
    "[default: the exception type of the run with every candidate reverted].",
)
@click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="With --git: where drafted recipes are kept [default: $XDG_CACHE_HOME/prtoggle/history].",
)
@whole_only_option
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def bisect_command(
    *,
    mode: Mode | None,
    candidate_specs: tuple[str, ...],
    timeout: float | None,
    crash_as: Verdict,
    timeout_as: Verdict,
    metric: str | None,
    threshold: float | None,
    lower_is_better: bool,
    cold: bool,
    git_range: str | None,
    repo: Path | None,
    source_dir: str | None,
    repeat: int,
    fingerprint: str | None,
    cache: Path | None,
    whole_only: bool,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Find which fix(es) COMMAND needs: run it with sets of fixes reverted.

    A culprit whose recipe is partial (some changes of the fix stay) is marked so;
    --whole-only (or PRTOGGLE_WHOLE_ONLY=1) leaves partial recipes out of the search.
    """
    if git_range is not None:
        _refuse_with_git(candidate_specs=candidate_specs, metric=metric, whole_only=whole_only)
        history_bisect(
            spec=git_range,
            repo=repo or Path.cwd(),
            source_dir=source_dir,
            mode=mode,
            repeat=repeat,
            fingerprint=fingerprint,
            cache=cache,
            timeout=timeout,
            cold=cold,
            as_json=as_json,
            command=command,
        )
        return
    _refuse_without_git(
        repo=repo, source_dir=source_dir, repeat=repeat, fingerprint=fingerprint, cache=cache
    )
    mode = mode or "attribute"
    metric_rule = _metric_rule(metric, threshold, lower_is_better=lower_is_better)
    echo = _progress_echo(as_json)
    plan = bisect_plan(candidate_specs, command=command, whole_only=whole_only)
    echo_notes(plan.notes)
    for line in plan.skips:
        echo(line)
    records: list[RunRecord] = []
    result = run_bisect(
        plan,
        command=command,
        mode=mode,
        cold=cold,
        timeout=timeout,
        counts={"crash": crash_as, "timeout": timeout_as},
        metric=metric_rule,
        on_run=lambda record: _record(records, record, echo),
    )
    usable = plan.usable
    broken, absent = plan.broken, plan.absent
    partial = sorted({recipe.pr for recipe in usable if recipe.partial})
    if as_json:
        left_out = sorted({*broken, *absent})
        echo_json({**_result_record(result, records, not_applicable=left_out), "partial": partial})
    else:
        _print_answer(result)
        _print_partial(result, partial)
    if not result.found:
        sys.exit(EXIT_NEGATIVE)


def _refuse_with_git(
    *, candidate_specs: tuple[str, ...], metric: str | None, whole_only: bool
) -> None:
    given = [
        name
        for name, value in (
            ("-r", candidate_specs),
            ("--metric", metric),
            ("--whole-only", whole_only),
        )
        if value
    ]
    if given:
        raise click.UsageError(
            f"{', '.join(given)} cannot be used with --git: --git bisects commits of a range, "
            "-r/--metric/--whole-only bisect fixes of the recipe collections"
        )


def _refuse_without_git(
    *,
    repo: Path | None,
    source_dir: str | None,
    repeat: int,
    fingerprint: str | None,
    cache: Path | None,
) -> None:
    given = [
        name
        for name, value in (
            ("--repo", repo),
            ("--source-dir", source_dir),
            ("--repeat", repeat != 1),
            ("--fingerprint", fingerprint),
            ("--cache", cache),
        )
        if value
    ]
    if given:
        verb = "needs" if len(given) == 1 else "need"
        raise click.UsageError(
            f"{', '.join(given)} {verb} --git A..B (a range of commits to bisect)"
        )


def _metric_rule(
    metric: str | None, threshold: float | None, *, lower_is_better: bool
) -> MetricRule | None:
    if metric is None:
        if threshold is not None or lower_is_better:
            raise click.UsageError("--threshold and --lower-is-better need --metric REGEX")
        return None
    if threshold is None:
        raise click.UsageError(f"--metric {metric!r} needs --threshold X (a number)")
    try:
        pattern = re.compile(metric)
    except re.error as exc:
        raise click.BadParameter(
            f"{metric!r} is not a regular expression: {exc}", param_hint="--metric"
        ) from exc
    return MetricRule(pattern=pattern, threshold=threshold, lower_is_better=lower_is_better)


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
        runs = plural(result.runs, "run")
        click.echo(f"{label}: {join_prs(result.culprits)} ({result.mode}, {runs})")
    else:
        click.echo(f"no culprit found ({result.mode}, {plural(result.runs, 'run')})")
    click.echo(result.conclusion)
    if result.skipped:
        click.echo(f"skipped: {join_prs(result.skipped)}")


def _print_partial(result: BisectResult, partial: Sequence[int]) -> None:
    """An answer resting on a partial revert says so (`prtoggle show N` lists what stays)."""
    resting = [pr for pr in result.culprits if pr in partial]
    if resting:
        click.echo(
            f"partial: the revert of {join_prs(resting)} leaves some changes of the fix as "
            "they are; the answer rests on a partial revert"
        )


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

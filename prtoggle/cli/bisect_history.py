"""`prtoggle bisect --git A..B`: the history search run, its progress and answer printed."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from prtoggle.cli.common import EXIT_NEGATIVE, echo_json
from prtoggle.commands.bisect_history import (
    FailureRule,
    HistoryAnswer,
    HistoryBisect,
    HistoryMode,
    Probe,
)
from prtoggle.recipes.authoring.history import HistoryRange, default_cache, read_range
from prtoggle.runners.warm_client import warm_enabled

HISTORY_EPILOG = """\b
History (--git A..B): the candidates are the first-parent commits of A..B in
--repo that change the package's Python source under --source-dir (test-only,
docs-only and other commits are listed, not searched). COMMAND runs first with
nothing reverted, traced: the candidates that reach that run (change module-
level code of a module it imported, or a function it ran) are searched first,
every candidate only if reverting those passes; after a culprit, the newer
commits that reach the run are checked, so the answer is the newest one. Each
probe reverts commits in the installed code: the commits from one candidate up
to B, as one recipe drafted from `git diff C^ B` on the files they change
(what reverting each commit newest first gives), cached by commit under
--cache, so a second bisect drafts nothing. Runs after the first are forked
from a warm worker that imported the run's modules once (--cold: fresh
processes). ordered (the default) binary-searches those suffixes; attribute
reverts each candidate that reaches the run alone. --repeat N runs each probe
N times and takes the majority. Any failure of COMMAND counts (not a timeout,
a crash, a revert that did not apply, or an ImportError in a module the probe
left as it is, for a name it took away); --fingerprint REGEX counts only
failures whose output matches. A probe that fails otherwise or times out is
inconclusive; a partial probe that passes rules out only the commits it
reverted whole: the others are said as "cannot be ruled out", never dropped.
The culprit is then reverted alone to confirm it, and the one command that
reproduces the verdict is printed. Exit status as below.
"""

HISTORY_EXAMPLE = (
    "  prtoggle bisect --git v0.5.16..v0.5.17 --repo ~/sglang -- python -m pytest -q t.py\n"
)


def history_bisect(
    *,
    spec: str,
    repo: Path,
    source_dir: str | None,
    mode: str | None,
    repeat: int,
    fingerprint: str | None,
    cache: Path | None,
    timeout: float | None,
    cold: bool,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Run `bisect --git`: read the range, search it, print progress and the answer."""
    if mode not in (None, "ordered", "attribute"):
        raise click.UsageError(f"--mode {mode} does not take --git; expected ordered or attribute")
    rule = FailureRule(pattern=_pattern(fingerprint))
    history = read_range(repo, spec, source_dir=_source_dir(repo, source_dir))
    echo = _echo(as_json)
    _print_range(history, echo)
    search = HistoryBisect(
        history=history,
        command=command,
        cache=cache or default_cache(),
        repeat=repeat,
        timeout=timeout,
        rule=rule,
        warm=warm_enabled(cold=cold),
        on_probe=lambda number, probe: echo(_probe_line(number, probe)),
        on_note=echo,
    )
    chosen: HistoryMode = "attribute" if mode == "attribute" else "ordered"
    answer = search.run(chosen)
    if as_json:
        echo_json(_answer_record(history, answer))
    else:
        for line in _answer_lines(answer):
            click.echo(line)
    if not answer.found:
        sys.exit(EXIT_NEGATIVE)


def _source_dir(repo: Path, given: str | None) -> str:
    if given is not None:
        return given.strip("/")
    return "python" if (repo / "python").is_dir() else ""


def _pattern(fingerprint: str | None) -> re.Pattern[str] | None:
    if fingerprint is None:
        return None
    try:
        return re.compile(fingerprint)
    except re.error as exc:
        raise click.BadParameter(
            f"{fingerprint!r} is not a regular expression: {exc}", param_hint="--fingerprint"
        ) from exc


def _echo(as_json: bool) -> Callable[[str], None]:
    def echo(text: str) -> None:
        click.echo(text, err=as_json)

    return echo


def _print_range(history: HistoryRange, echo: Callable[[str], None]) -> None:
    candidates = len(history.candidates)
    others = len(history.commits) - candidates
    where = history.source_dir or "the repository's top"
    echo(
        f"range {history.base[:12]}..{history.head[:12]}: {len(history.commits)} commits, "
        f"{candidates} change Python source under {where}"
    )
    if others:
        reasons: dict[str, int] = {}
        for commit in history.commits:
            if not commit.candidate:
                reasons[commit.reason_not_candidate] = (
                    reasons.get(commit.reason_not_candidate, 0) + 1
                )
        shown = "; ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
        echo(f"not candidates: {others} ({shown})")


def _probe_line(number: int, probe: Probe) -> str:
    runs = len(probe.runs)
    bad = [run.signature for run in probe.runs if run.outcome == "bad"]
    tail = probe.reason or (bad[0] if probe.verdict == "bad" and bad else "")
    seconds = sum(run.seconds for run in probe.runs)
    extra = f" [{runs} runs]" if runs > 1 else ""
    detail = f" - {tail}" if tail else ""
    partial = " (partial)" if probe.recipe is not None and probe.recipe.not_reverted else ""
    line = f"probe {number}: {probe.label}{partial} -> {probe.verdict}{extra} ({seconds:.1f} s)"
    return f"{line}{detail}"[:300]


def _answer_lines(answer: HistoryAnswer) -> list[str]:
    lines: list[str] = []
    if answer.culprits:
        for commit in answer.culprits:
            lines.append(f"culprit: {commit.describe()}")
            lines.append(f"  sha: {commit.sha}")
    else:
        lines.append(f"no culprit found ({answer.mode}, {len(answer.probes)} probes)")
    lines.append(answer.conclusion)
    if answer.suspects:
        lines.append(f"cannot be ruled out: {len(answer.suspects)} commits")
        lines.extend(f"  {commit.describe()}" for commit in answer.suspects[:20])
        if len(answer.suspects) > 20:
            lines.append(f"  and {len(answer.suspects) - 20} more (--json for all)")
    if answer.deciding:
        lines.append("decided by: " + ", ".join(f"probe {i + 1}" for i in answer.deciding))
    lines.extend(_confirmation_lines(answer))
    if answer.inconclusive:
        lines.append(f"inconclusive probes: {len(answer.inconclusive)} (see their lines above)")
    lines.append(f"failure counted: {answer.rule.describe()}")
    drafted, cached = _recipe_counts(answer)
    lines.append(f"recipes: {drafted} drafted, {cached} from the cache")
    return lines


def _recipe_counts(answer: HistoryAnswer) -> tuple[int, int]:
    """How many of the probes' recipes were drafted by this search, and how many came from
    the cache (a probe that needed no recipe counts in neither)."""
    recipes = [p.recipe for p in [*answer.probes] if p.recipe is not None]
    cached = sum(1 for recipe in recipes if recipe.cached)
    return len(recipes) - cached, cached


def _confirmation_lines(answer: HistoryAnswer) -> list[str]:
    lines: list[str] = []
    confirmation = answer.confirmation
    if confirmation is not None and answer.culprits:
        recipe = confirmation.recipe
        whole = "yes" if recipe is not None and recipe.whole else "no"
        lines.append(f"whole revert of the culprit alone: {whole}")
        if recipe is not None and recipe.not_reverted:
            lines.extend(f"  not reverted: {item}" for item in recipe.not_reverted[:5])
        verdict = {
            "bad": "fails as the search did",
            "good": "passes: the failure needs newer commits reverted with it",
            "skip": f"inconclusive ({confirmation.reason})",
        }[confirmation.verdict]
        lines.append(f"reverted alone: {verdict}")
    if answer.reproduce:
        lines.append(f"reproduce: {answer.reproduce}")
    return lines


def _answer_record(history: HistoryRange, answer: HistoryAnswer) -> dict[str, Any]:
    def commit_record(commit: Any) -> dict[str, Any]:
        return {
            "sha": commit.sha,
            "pr": commit.pr,
            "subject": commit.subject,
            "date": commit.date.isoformat(),
        }

    confirmation = answer.confirmation
    return {
        "mode": answer.mode,
        "found": answer.found,
        "range": {"base": history.base, "head": history.head, "commits": len(history.commits)},
        "candidates": len(history.candidates),
        "not_candidates": [
            {**commit_record(c), "reason": c.reason_not_candidate}
            for c in history.commits
            if not c.candidate
        ],
        "culprits": [commit_record(c) for c in answer.culprits],
        "cannot_be_ruled_out": [commit_record(c) for c in answer.suspects],
        "conclusion": answer.conclusion,
        "deciding_probes": [i + 1 for i in answer.deciding],
        "confirmation": confirmation.to_dict() if confirmation is not None else None,
        "reproduce": answer.reproduce,
        "failure_counted": answer.rule.describe(),
        "notes": answer.notes,
        "reach": (
            None
            if answer.reach is None
            else [
                {"sha": entry.commit.sha, "reaches": entry.reaches, "why": entry.why}
                for entry in answer.reach.commits
            ]
        ),
        "inconclusive": len(answer.inconclusive),
        "recipes": dict(zip(("drafted", "from_cache"), _recipe_counts(answer), strict=True)),
        "probes": [probe.to_dict() for probe in answer.probes],
    }

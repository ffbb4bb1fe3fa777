"""How `prtoggle bisect` picks its candidates, runs and judges one reverted set, and searches."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from prtoggle.commands.bisect_search import BisectResult, Judgement, Mode, Verdict, run_search
from prtoggle.commands.selections import (
    OuterRevert,
    load_default_registry,
    outer_revert,
    parse_revert_options,
    whole_selections,
)
from prtoggle.errors import PrToggleError
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.patching.swap import apply_layers
from prtoggle.protocol import REVERT_ENV, RUN_REPORT_ENV
from prtoggle.recipes.check import TargetCheck
from prtoggle.recipes.prs import join_prs
from prtoggle.recipes.registry import Recipe, Registry
from prtoggle.recipes.resolution import (
    check_without_import,
    command_search_path,
    import_free_source_root,
)
from prtoggle.recipes.selection import RevertRequest, select
from prtoggle.revert import child_report
from prtoggle.revert.toggle import child_env
from prtoggle.runners.child_outcome import ExitClass, classify_exit, last_exception
from prtoggle.runners.child_process import CommandRun
from prtoggle.runners.output_tail import TAIL_BYTES
from prtoggle.runners.script_targets import script_targets
from prtoggle.runners.warm_client import CommandRunner, command_runner, warm_enabled


@dataclass(frozen=True)
class MetricRule:
    """`--metric REGEX --threshold X [--lower-is-better]`: a run is judged by a number."""

    pattern: re.Pattern[str]
    threshold: float
    lower_is_better: bool = False

    def read(self, run: CommandRun) -> float | None:
        """The first group (or whole match) of the last match in stdout, else in stderr."""
        for text in (run.stdout, run.stderr):
            matches = list(self.pattern.finditer(text))
            if matches:
                last = matches[-1]
                number = last.group(1) if self.pattern.groups else last.group(0)
                try:
                    return float(number)
                except (TypeError, ValueError):
                    return None
        return None

    def verdict(self, value: float) -> Verdict:
        good = value <= self.threshold if self.lower_is_better else value >= self.threshold
        return "good" if good else "bad"

    def describe(self) -> str:
        relation = "<=" if self.lower_is_better else ">="
        return f"good when {self.pattern.pattern!r} reads {relation} {self.threshold:g}"


@dataclass(frozen=True)
class RunRecord:
    """One bisect run as printed: the reverted set, its class, verdict, status and time."""

    reverted: tuple[int, ...]
    exit_class: str
    verdict: Verdict
    exit_code: int | None
    seconds: float
    note: str = ""
    metric: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "reverted": list(self.reverted),
            "class": self.exit_class,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "metric": self.metric,
            "seconds": round(self.seconds, 3),
            "note": self.note,
        }

    def line(self, number: int) -> str:
        status = f"exit {self.exit_code}" if self.exit_code is not None else "no exit status"
        if self.metric is not None:
            status += f", metric {self.metric:g}"
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


@dataclass(frozen=True)
class BisectPlan:
    """What a bisect searches: the usable candidates (oldest first), the PRs left out (no
    recipe applies: `absent`; the revert does not apply: `broken`), one progress line per
    PR left out (`skips`), the stderr notes of the selection (`notes`) and the revert of an
    outer prtoggle run, kept in every run (`outer`)."""

    usable: list[Recipe]
    absent: dict[int, str]
    broken: dict[int, list[TargetCheck]]
    skips: list[str]
    notes: tuple[str, ...]
    outer: OuterRevert


def bisect_plan(
    specs: Sequence[str], *, command: Sequence[str], whole_only: bool = False
) -> BisectPlan:
    """The candidates `-r SPECS` (default: every recipe that applies here) gives a search of
    COMMAND, each checked first without importing it; what is left out says why."""
    registry = load_default_registry()
    search_path = command_search_path(command)
    outer = outer_revert(os.environ, command="bisect", registry=registry)
    candidates, absent, notes = _candidates(
        registry, specs, search_path=search_path, whole_only=whole_only
    )
    candidates = [recipe for recipe in candidates if recipe.pr not in outer.prs]
    notes = (*((outer.note,) if outer.note else ()), *notes)
    skips = [
        f"skip: PR {pr} is left out, no recipe of it applies here: {reason}"
        for pr, reason in absent.items()
    ]
    checks = check_without_import(candidates, search_path=search_path)
    broken = {pr: results for pr, results in checks.items() if any(_unusable(c) for c in results)}
    for pr, results in broken.items():
        reason = "; ".join(f"{c.target}: {c.message}" for c in results if _unusable(c))
        skips.append(f"skip: PR {pr} is left out, its revert does not apply: {reason}")
    for inside in script_targets([f for f in candidates if f.pr not in broken], command):
        if inside.recipe.pr not in broken:
            broken[inside.recipe.pr] = []
            skips.append(f"skip: PR {inside.recipe.pr} is left out: {inside.reason}")
    usable = [recipe for recipe in candidates if recipe.pr not in broken]
    return BisectPlan(usable, absent, broken, skips, notes, outer)


def run_bisect(
    plan: BisectPlan,
    *,
    command: Sequence[str],
    mode: Mode,
    cold: bool,
    timeout: float | None,
    counts: Mapping[str, Verdict],
    metric: MetricRule | None,
    on_run: Callable[[RunRecord], None],
) -> BisectResult:
    """Search the plan's candidates with `mode`, each run of COMMAND told to `on_run`."""
    with _runner(list(command), plan.usable, cold=cold) as runner:
        oracle = command_oracle(
            list(command),
            recipes=_by_pr(plan.usable),
            run=runner,
            timeout=timeout,
            counts=counts,
            metric=metric,
            on_run=on_run,
            keep=plan.outer.spec,
        )
        return run_search(mode, list(dict.fromkeys(recipe.pr for recipe in plan.usable)), oracle)


def command_oracle(
    argv: list[str],
    *,
    recipes: Mapping[int, Sequence[Recipe]],
    run: CommandRunner,
    timeout: float | None,
    counts: Mapping[str, Verdict],
    metric: MetricRule | None,
    on_run: Callable[[RunRecord], None],
    keep: str | None = None,
) -> Callable[[tuple[int, ...]], Judgement]:
    """Judge each reverted set: a conflict is found before running, the rest by running.

    `keep`: an outer prtoggle run's SGLANG_DEBUG_REVERT_PR, in force in every run too (and
    what each run's processes report is passed on to that run).
    """
    base = {key: value for key, value in os.environ.items() if key != REVERT_ENV}
    outer_reports = os.environ.get(RUN_REPORT_ENV) if keep else None
    search_path = command_search_path(argv)

    def oracle(reverted: tuple[int, ...]) -> Judgement:
        reverting = [recipe for pr in reverted for recipe in recipes[pr]]
        conflict = revert_conflict(reverting, search_path=search_path)
        if conflict is not None:
            prs, message = conflict
            reason = f"conflict: the reverts of {join_prs(prs)} cannot apply together: {message}"
            on_run(RunRecord(reverted, "conflict", "skip", None, 0.0, reason[:300]))
            return Judgement("skip", reason=message, conflict=prs)
        with child_report.collecting_reports(
            _env_for(reverted, base, recipes=recipes, keep=keep)
        ) as (
            env,
            directory,
        ):
            done = run(argv, env=env, timeout=timeout)
            reports = child_report.read_reports(directory)
            if outer_reports:
                child_report.forward_reports(directory, to=Path(outer_reports))
        note = child_report.not_landed(reverted, reports, command=argv)
        if note is not None:  # the run says nothing about reverts that did not land
            on_run(RunRecord(reverted, "not reverted", "skip", done.returncode, done.seconds, note))
            return Judgement("skip", reason=note)
        exit_class = classify_exit(done)
        value = metric.read(done) if metric is not None else None
        shown, verdict, note = _judge(done, exit_class, counts, metric, value)
        on_run(RunRecord(reverted, shown, verdict, done.returncode, done.seconds, note, value))
        return Judgement(verdict, reason=note)

    return oracle


def revert_conflict(
    recipes: Sequence[Recipe], *, search_path: Sequence[str] = ()
) -> tuple[tuple[int, int], str] | None:
    """The first pair of `fixes` whose edits of a shared target cannot apply together.

    Found from the source files (nothing imported; packages found as resolution finds
    them for the command, `search_path` first), with the edits layered in PR order as a
    child applies them. None when every shared target takes every layer.
    """
    sharing: dict[str, list[Recipe]] = {}
    for recipe in sorted(recipes, key=lambda f: f.pr):
        for patch in recipe.patches:
            sharing.setdefault(patch.target, []).append(recipe)
    for target, editors in sharing.items():
        root = (
            import_free_source_root(editors[0], search_path=search_path)
            if len(editors) > 1
            else None
        )
        if root is None:
            continue
        try:
            source = find_in_source_tree(target, source_root=root)
        except PrToggleError:
            continue  # the target itself is missing: each fix alone is already left out
        for first, second in combinations(editors, 2):
            layers = [first.edit_layer(target), second.edit_layer(target)]
            try:
                apply_layers(source, layers)
            except PrToggleError as exc:
                return (first.pr, second.pr), str(exc).splitlines()[0]
    return None


def _candidates(
    registry: Registry,
    specs: Sequence[str],
    *,
    search_path: Sequence[str],
    whole_only: bool = False,
) -> tuple[list[Recipe], dict[int, str], tuple[str, ...]]:
    """The recipes bisect may revert, oldest first, the PRs none of whose recipes apply,
    and the notes of `--whole-only`.

    The selection rule decides each PR's recipes: one outside its `applies_to`, whose
    package is absent (neither installed nor where COMMAND's Python looks first:
    `search_path`), or an upstream text shadowed or stale, is absent from the search
    (never a conflict).
    """
    requests = parse_revert_options(specs, registry) if specs else None
    chosen = [RevertRequest(pr) for pr in registry.prs()] if requests is None else requests
    selections = [select(registry, request, search_path=search_path) for request in chosen]
    kept_selections, notes = whole_selections(
        selections, whole_only=whole_only, everything=requests is None
    )
    selections = list(kept_selections)
    kept = {recipe for selection in selections for recipe in selection.recipes}
    absent = {
        s.request.pr: "; ".join(item.line() for item in s.left_out)
        for s in selections
        if not s.recipes and (requests is not None or s.left_out)
    }
    return [recipe for recipe in registry.by_merge_date() if recipe in kept], absent, notes


def _by_pr(recipes: Sequence[Recipe]) -> dict[int, list[Recipe]]:
    """A PR's fixes in every collection (one revert request reverts them all)."""
    grouped: dict[int, list[Recipe]] = {}
    for recipe in recipes:
        grouped.setdefault(recipe.pr, []).append(recipe)
    return grouped


@contextmanager
def _runner(
    command: list[str], recipes: Sequence[Recipe], *, cold: bool
) -> Iterator[CommandRunner]:
    """The warm worker or plain children.

    The worker preloads prtoggle's toggles and each candidate's `component` module (which
    imports what the fixed code needs, e.g. torch): the command's own imports, not more.
    A run is judged when its command's process exits (a background process holding its
    stdout is ended, not waited for), from the last TAIL_BYTES of each stream.
    """
    modules = [
        "prtoggle.revert.toggle",
        *(recipe.component for recipe in recipes if recipe.component),
    ]
    if command[1:3] == ["-m", "pytest"]:
        modules.append("pytest")
    with command_runner(
        warm=warm_enabled(cold=cold), preload=modules, output_limit=TAIL_BYTES
    ) as runner:
        yield runner


def _unusable(check: TargetCheck) -> bool:
    """Not ok, except a recipe for another version (not-applicable), which stays inert."""
    return check.status not in ("ok", "not-applicable")


def _judge(
    run: CommandRun,
    exit_class: ExitClass,
    counts: Mapping[str, Verdict],
    metric: MetricRule | None,
    value: float | None,
) -> tuple[str, Verdict, str]:
    """(class shown, verdict, note): with --metric, the number decides a run that exited."""
    if exit_class in ("timeout", "crash"):
        return exit_class, counts[exit_class], _note(run, exit_class)
    if exit_class == "skip" or metric is None:
        return exit_class, exit_class, _note(run, exit_class)  # type: ignore[return-value]
    if value is None:
        note = f"no number matching --metric {metric.pattern.pattern!r} in stdout or stderr"
        return "no metric", "skip", note
    verdict = metric.verdict(value)
    return verdict, verdict, ""


def _env_for(
    reverted: Sequence[int],
    base: dict[str, str],
    *,
    recipes: Mapping[int, Sequence[Recipe]],
    keep: str | None = None,
) -> dict[str, str]:
    """The child's environment: exactly the bisected recipes of `reverted` (`C:N` each),
    after `keep` (an outer run's revert, kept as it was given)."""
    specs = [
        *([keep] if keep else []),
        *(f"{f.collection}:{f.pr}" for pr in reverted for f in recipes[pr]),
    ]
    if not specs:
        return dict(base)
    return child_env(specs, base=base)


def _note(run: CommandRun, exit_class: ExitClass) -> str:
    if exit_class == "timeout":
        return f"killed after {run.timeout:g} s"
    if exit_class == "crash" and run.signal_name:
        return f"killed by {run.signal_name}"
    if exit_class in ("skip", "crash") and run.returncode != 125:
        error_type, message = last_exception(run.stderr)
        if error_type:
            return f"{error_type}: {message}"[:200]
    return ""

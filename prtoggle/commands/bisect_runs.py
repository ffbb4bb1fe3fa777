"""How `prtoggle bisect` runs and judges one reverted set: exit status or metric, conflicts."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

from prtoggle.commands.bisect_search import Judgement, Verdict
from prtoggle.errors import PrToggleError
from prtoggle.recipes.prs import join_prs
from prtoggle.recipes.resolution import command_search_path, import_free_source_root

if TYPE_CHECKING:
    from prtoggle.recipes.registry import Recipe
    from prtoggle.runners.child_outcome import ExitClass
    from prtoggle.runners.child_process import CommandRun
    from prtoggle.runners.warm_client import CommandRunner


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


def command_oracle(
    argv: list[str],
    *,
    fixes: Mapping[int, Sequence[Recipe]],
    run: CommandRunner,
    timeout: float | None,
    counts: Mapping[str, Verdict],
    metric: MetricRule | None,
    on_run: Callable[[RunRecord], None],
) -> Callable[[tuple[int, ...]], Judgement]:
    """Judge each reverted set: a conflict is found before running, the rest by running."""
    from prtoggle.protocol import REVERT_ENV
    from prtoggle.revert import child_report
    from prtoggle.runners.child_outcome import classify_exit

    base = {key: value for key, value in os.environ.items() if key != REVERT_ENV}
    search_path = command_search_path(argv)

    def oracle(reverted: tuple[int, ...]) -> Judgement:
        reverting = [fix for pr in reverted for fix in fixes[pr]]
        conflict = revert_conflict(reverting, search_path=search_path)
        if conflict is not None:
            prs, message = conflict
            reason = f"conflict: the reverts of {join_prs(prs)} cannot apply together: {message}"
            on_run(RunRecord(reverted, "conflict", "skip", None, 0.0, reason[:300]))
            return Judgement("skip", reason=message, conflict=prs)
        with child_report.collecting_reports(_env_for(reverted, base, fixes=fixes)) as (
            env,
            directory,
        ):
            done = run(argv, env=env, timeout=timeout)
            reports = child_report.read_reports(directory)
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
    fixes: Sequence[Recipe], *, search_path: Sequence[str] = ()
) -> tuple[tuple[int, int], str] | None:
    """The first pair of `fixes` whose edits of a shared target cannot apply together.

    Found from the source files (nothing imported; packages found as resolution finds
    them for the command, `search_path` first), with the edits layered in PR order as a
    child applies them. None when every shared target takes every layer.
    """
    from prtoggle.patching.source_tree import find_in_source_tree
    from prtoggle.patching.swap import apply_layers

    sharing: dict[str, list[Recipe]] = {}
    for fix in sorted(fixes, key=lambda f: f.pr):
        for patch in fix.patches:
            sharing.setdefault(patch.target, []).append(fix)
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
    reverted: Sequence[int], base: dict[str, str], *, fixes: Mapping[int, Sequence[Recipe]]
) -> dict[str, str]:
    """The child's environment: exactly the bisected recipes of `reverted` (`C:N` each)."""
    if not reverted:
        return dict(base)
    from prtoggle.revert.toggle import child_env

    specs = [f"{fix.collection}:{fix.pr}" for pr in reverted for fix in fixes[pr]]
    return child_env(specs, base=base)


def _note(run: CommandRun, exit_class: ExitClass) -> str:
    from prtoggle.runners.child_outcome import last_exception

    if exit_class == "timeout":
        return f"killed after {run.timeout:g} s"
    if exit_class == "crash" and run.signal_name:
        return f"killed by {run.signal_name}"
    if exit_class in ("skip", "crash") and run.returncode != 125:
        error_type, message = last_exception(run.stderr)
        if error_type:
            return f"{error_type}: {message}"[:200]
    return ""

"""`prtoggle bisect --git A..B`: which commit of a range a command depends on, found by
reverting commits in the installed code (no checkout, no rebuild).

Each probe runs COMMAND with a history recipe reverted (see recipes/authoring/history.py),
`repeat` times, and takes the majority. A failing run counts as the regression only when
its failure matches the fingerprint: `--fingerprint REGEX`, else the exception type of the
run with every candidate reverted. Probes that fail otherwise, time out, crash, or whose
revert is partial and passes, are inconclusive (skips); the commits they leave undecided
are said as "cannot be ruled out", never silently dropped.
"""

from __future__ import annotations

import os
import re
import shlex
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from prtoggle.errors import PrToggleError
from prtoggle.recipes.authoring.history import (
    HistoryCommit,
    HistoryRange,
    HistoryRecipe,
    commit_recipe,
    stayed_commits,
    suffix_recipe,
)
from prtoggle.recipes.registry import YAML_PATH_ENV
from prtoggle.revert import child_report
from prtoggle.revert.toggle import child_env
from prtoggle.runners.child_outcome import classify_exit, last_exception
from prtoggle.runners.child_process import CommandRun
from prtoggle.runners.output_tail import TAIL_BYTES
from prtoggle.runners.warm_client import command_runner

Verdict = Literal["good", "bad", "skip"]
_MOST_LEFT_OUT = 24
"""How many files a probe leaves as they are before it is called inconclusive."""
_MOST_RETRIES = 4
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")
HistoryMode = Literal["ordered", "attribute"]

_SUMMARY_LINE = re.compile(
    r"^(?:FAILED|ERROR) \S+(?: - (?:(?P<assertion>assert .*)|"
    r"(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Failed|Interrupt|Warning))"
    r"(?::\s?(?P<msg>.*))?|.*))?$"
)
_E_LINE = re.compile(
    r"^E\s+(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Failed|Interrupt)):?\s?(?P<msg>.*)$"
)


@dataclass(frozen=True)
class FailureRule:
    """What counts as the regression's failure: `pattern` over the run's output, else the
    exception `type` learned from the run with every candidate reverted."""

    pattern: re.Pattern[str] | None = None
    type: str | None = None

    def describe(self) -> str:
        if self.pattern is not None:
            return f"output matching {self.pattern.pattern!r}"
        if self.type is None:
            return "any failure"
        if self.type.startswith("exit "):
            return f"a failure with {self.type} and no exception named"
        return f"a failure raising {self.type}"


@dataclass(frozen=True)
class ProbeRun:
    """One run of a probe: its class (good, bad, other), failure signature, status, time."""

    outcome: Literal["good", "bad", "other"]
    signature: str
    exit_code: int | None
    seconds: float
    note: str = ""


@dataclass(frozen=True)
class Probe:
    """A set of commits reverted, COMMAND's runs under it, and the majority's verdict."""

    label: str
    reverted: tuple[str, ...]
    verdict: Verdict
    runs: tuple[ProbeRun, ...]
    reason: str = ""
    recipe: HistoryRecipe | None = None
    stayed: tuple[HistoryCommit, ...] = ()
    """The commits whose changes this probe's partial revert left as they are."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "reverted": list(self.reverted),
            "verdict": self.verdict,
            "reason": self.reason,
            "whole": self.recipe.whole if self.recipe is not None else True,
            "not_reverted": list(self.recipe.not_reverted) if self.recipe is not None else [],
            "stayed": [commit.sha for commit in self.stayed],
            "runs": [
                {
                    "outcome": run.outcome,
                    "signature": run.signature,
                    "exit_code": run.exit_code,
                    "seconds": round(run.seconds, 3),
                    "note": run.note,
                }
                for run in self.runs
            ],
        }


@dataclass
class HistoryAnswer:
    """The search's answer: the culprit (or the suspects that cannot be ruled out), the
    probes that decided it, the confirmation with the culprit alone reverted, and the
    command that reproduces the verdict."""

    mode: HistoryMode
    culprits: list[HistoryCommit] = field(default_factory=list)
    suspects: list[HistoryCommit] = field(default_factory=list)
    conclusion: str = ""
    probes: list[Probe] = field(default_factory=list)
    deciding: list[int] = field(default_factory=list)
    confirmation: Probe | None = None
    reproduce: str = ""
    rule: FailureRule = field(default_factory=FailureRule)

    @property
    def found(self) -> bool:
        return bool(self.culprits)

    @property
    def inconclusive(self) -> list[Probe]:
        return [probe for probe in self.probes if probe.verdict == "skip"]


@dataclass
class HistoryBisect:
    """One search over `history`: runs COMMAND per probe and keeps every probe in order."""

    history: HistoryRange
    command: tuple[str, ...]
    cache: Path
    repeat: int = 1
    timeout: float | None = None
    rule: FailureRule = field(default_factory=FailureRule)
    on_probe: Callable[[int, Probe], None] = lambda number, probe: None
    probes: list[Probe] = field(default_factory=list)
    not_landing: dict[str, str] = field(default_factory=dict)
    """Files whose revert did not land in a probe: later probes leave them as they are."""
    _memo: dict[str, Probe] = field(default_factory=dict)

    def run(self, mode: HistoryMode) -> HistoryAnswer:
        """Search with `mode` ('ordered': binary search over suffixes; 'attribute': each
        candidate alone)."""
        candidates = list(self.history.candidates)
        if not candidates:
            return self._answer(
                mode, conclusion="no candidate commit in the range: nothing to revert"
            )
        baseline = self._probe_nothing()
        if baseline.verdict != "good":
            return self._answer(
                mode,
                conclusion=(
                    f"with nothing reverted the command is {baseline.verdict}, expected good "
                    f"({baseline.reason or _runs_summary(baseline)}): it does not depend on a "
                    "commit of the range"
                ),
            )
        if mode == "attribute":
            return self._attribute(candidates)
        return self._ordered(candidates)

    def _ordered(self, candidates: list[HistoryCommit]) -> HistoryAnswer:
        everything = self._probe_suffix(candidates, 0, learn=True)
        if everything.verdict != "bad":
            why = everything.reason or _runs_summary(everything)
            return self._answer(
                "ordered",
                suspects=list(everything.stayed),
                conclusion=(
                    f"with every candidate reverted the command is {everything.verdict} ({why}), "
                    "expected bad: no commit of the range is shown to be needed"
                ),
            )
        bad, good = 0, len(candidates)
        verdicts: dict[int, Probe] = {0: everything, good: self.probes[0]}
        skipped: set[int] = set()
        while good - bad > 1:
            index = _next_untested(bad, good, skipped)
            if index is None:
                return self._undecided(candidates[bad:good], verdicts, bad, good)
            probe = self._probe_suffix(candidates, index)
            verdicts[index] = probe
            if probe.verdict == "skip":
                skipped.add(index)
            elif probe.verdict == "bad":
                bad = index
            else:
                good = index
        culprit = candidates[bad]
        answer = self._answer(
            "ordered",
            culprits=[culprit],
            conclusion=(
                f"reverting {culprit.short} and every newer commit makes the command fail; "
                + (
                    f"reverting only the {len(candidates) - bad - 1} newer ones does not"
                    if bad + 1 < len(candidates)
                    else "with nothing reverted it passes"
                )
            ),
        )
        answer.deciding = [self.probes.index(verdicts[bad]), self.probes.index(verdicts[good])]
        self._confirm(answer, culprit, deciding=verdicts[bad])
        return answer

    def _attribute(self, candidates: list[HistoryCommit]) -> HistoryAnswer:
        culprits: list[HistoryCommit] = []
        suspects: list[HistoryCommit] = []
        for commit in candidates:
            probe = self._probe_alone(commit, learn=self.rule.type is None)
            if probe.verdict == "bad":
                culprits.append(commit)
            elif probe.verdict == "skip":
                suspects.append(commit)
        conclusion = (
            f"reverting {', '.join(c.short for c in culprits)} alone makes the command fail"
            if culprits
            else "no single commit's revert makes the command fail"
        )
        if suspects:
            conclusion += f"; {len(suspects)} cannot be ruled out (their probes were inconclusive)"
        answer = self._answer(
            "attribute", culprits=culprits, suspects=suspects, conclusion=conclusion
        )
        answer.deciding = [i for i, p in enumerate(self.probes) if p.verdict == "bad"]
        if len(culprits) == 1:
            alone = self._memo[f"alone:{culprits[0].sha}"]
            answer.confirmation = alone
            answer.reproduce = _reproduce_line(alone.recipe, self.command)
        return answer

    def _undecided(
        self, suspects: list[HistoryCommit], verdicts: dict[int, Probe], bad: int, good: int
    ) -> HistoryAnswer:
        reasons = sorted({p.reason for i, p in verdicts.items() if bad < i < good and p.reason})
        conclusion = (
            f"the culprit is one of {len(suspects)} commits that cannot be ruled out: the probes "
            f"between them were inconclusive ({'; '.join(reasons) or 'skipped'})"
        )
        answer = self._answer("ordered", suspects=suspects, conclusion=conclusion)
        answer.deciding = [self.probes.index(verdicts[bad]), self.probes.index(verdicts[good])]
        return answer

    def _confirm(self, answer: HistoryAnswer, culprit: HistoryCommit, *, deciding: Probe) -> None:
        """Revert the culprit alone: the confirmation the answer reports, and the command
        that reproduces the verdict (the culprit alone where that fails as the search did,
        else the deciding probe's set)."""
        alone = self._probe_alone(culprit)
        answer.confirmation = alone
        reproducer = alone.recipe if alone.verdict == "bad" else deciding.recipe
        answer.reproduce = _reproduce_line(reproducer, self.command)

    def _probe_nothing(self) -> Probe:
        return self._probe("nothing", "nothing reverted", (), None)

    def _probe_suffix(
        self, candidates: list[HistoryCommit], index: int, *, learn: bool = False
    ) -> Probe:
        """Revert candidates[index:]; a file whose revert does not land at run time is left
        as it is (listed, so the probe is partial) and the probe run again without it."""
        oldest = candidates[index]
        newer = candidates[index:]
        plural = "s" if len(newer) != 1 else ""
        label = f"reverting {len(newer)} commit{plural} from {oldest.describe()}"
        changed = {file for commit in newer for file in commit.files}
        left_out = {f: why for f, why in self.not_landing.items() if f in changed}
        for _attempt in range(_MOST_RETRIES + 1):
            probe = self._suffix_once(oldest, newer, label, left_out, learn=learn)
            failed = _not_landed_files(probe, newer) - set(left_out)
            if (
                probe.verdict != "skip"
                or not failed
                or len(left_out) + len(failed) > _MOST_LEFT_OUT
            ):
                return probe
            for file in failed:
                left_out[file] = self.not_landing[file] = (
                    "its revert did not land at run time (probes leave it as it is)"
                )
        return probe

    def _suffix_once(
        self,
        oldest: HistoryCommit,
        newer: list[HistoryCommit],
        label: str,
        left_out: dict[str, str],
        *,
        learn: bool,
    ) -> Probe:
        if left_out:
            files = "file" if len(left_out) == 1 else "files"
            label = f"{label}, less {len(left_out)} {files} whose revert did not land"
        key = f"suffix:{oldest.sha}:{','.join(sorted(left_out))}"
        try:
            recipe = suffix_recipe(self.history, oldest, cache=self.cache, left_out=left_out)
        except PrToggleError as exc:
            return self._refused(key, label, newer, f"cannot draft: {_first_line(exc)}")
        return self._probe(
            key,
            label,
            tuple(c.sha for c in newer),
            recipe,
            learn=learn,
            among=newer,
        )

    def _probe_alone(self, commit: HistoryCommit, *, learn: bool = False) -> Probe:
        label = f"reverting {commit.describe()} alone"
        try:
            recipe = commit_recipe(self.history, commit, cache=self.cache)
        except PrToggleError as exc:
            return self._refused(
                f"alone:{commit.sha}", label, [commit], f"cannot draft: {_first_line(exc)}"
            )
        return self._probe(
            f"alone:{commit.sha}", label, (commit.sha,), recipe, learn=learn, among=[commit]
        )

    def _refused(
        self, key: str, label: str, commits: Sequence[HistoryCommit], reason: str
    ) -> Probe:
        probe = Probe(label, tuple(c.sha for c in commits), "skip", (), reason)
        return self._keep(key, probe)

    def _probe(
        self,
        key: str,
        label: str,
        reverted: tuple[str, ...],
        recipe: HistoryRecipe | None,
        *,
        learn: bool = False,
        among: Sequence[HistoryCommit] = (),
    ) -> Probe:
        if key in self._memo:
            return self._memo[key]
        if recipe is not None and recipe.nothing:
            reason = f"nothing to revert: {recipe.nothing}"
            return self._keep(key, Probe(label, reverted, "skip", (), reason, recipe))
        runs: list[ProbeRun] = []
        for _ in range(self.repeat):
            runs.append(self._run_once(recipe))
            if not learn and _settled(runs, self.repeat):
                break  # the probe that learns the failure runs every time: its majority
        if learn and self.rule.pattern is None:
            self.rule = _learned(self.rule, runs)
            runs = [_rejudged(run, self.rule) for run in runs]
        verdict, reason = _majority(runs, self.repeat)
        stayed: list[HistoryCommit] = []
        if recipe is not None and recipe.not_reverted and verdict == "good":
            stayed = stayed_commits(self.history, recipe, among=among)
            named = ", ".join(c.short for c in stayed) or "some commits"
            verdict, reason = (
                "skip",
                (
                    f"partial: changes of {named} stay ({'; '.join(recipe.not_reverted)[:200]}); "
                    "a passing run cannot rule them out"
                ),
            )
        probe = Probe(label, reverted, verdict, tuple(runs), reason, recipe, tuple(stayed))
        return self._keep(key, probe)

    def _keep(self, key: str, probe: Probe) -> Probe:
        self._memo[key] = probe
        self.probes.append(probe)
        self.on_probe(len(self.probes), probe)
        return probe

    def _run_once(self, recipe: HistoryRecipe | None) -> ProbeRun:
        env = dict(os.environ)
        specs: list[str] = []
        if recipe is not None:
            known = env.get(YAML_PATH_ENV)
            env[YAML_PATH_ENV] = os.pathsep.join(
                [str(recipe.directory), *([known] if known else [])]
            )
            specs = [recipe.spec]
        env = child_env(specs, base=env)
        with (
            command_runner(warm=False, output_limit=TAIL_BYTES) as runner,
            child_report.collecting_reports(env) as (run_env, directory),
        ):
            done = runner(list(self.command), env=run_env, timeout=self.timeout)
            reports = child_report.read_reports(directory)
        if recipe is not None:
            pr = int(recipe.spec.rsplit(":", 1)[1])
            note = child_report.not_landed([pr], reports, command=self.command)
            if note is not None:
                return ProbeRun("other", "not reverted", done.returncode, done.seconds, note[:2000])
        return _judge(done, self.rule)

    def _answer(self, mode: HistoryMode, **values: Any) -> HistoryAnswer:
        return HistoryAnswer(mode, probes=self.probes, rule=self.rule, **values)


def _not_landed_files(probe: Probe, commits: Sequence[HistoryCommit]) -> set[str]:
    """The files (under the source folder) of the modules whose revert the runs of `probe`
    say did not land, among those the commits change."""
    files = {file for commit in commits for file in commit.files}
    found: set[str] = set()
    for run in probe.runs:
        if run.outcome != "other":
            continue
        for dotted in set(_DOTTED.findall(f"{run.note} {run.signature}")):
            parts = dotted.split(".")
            for end in range(len(parts), 0, -1):
                stem = "/".join(parts[:end])
                hit = next((f for f in (f"{stem}.py", f"{stem}/__init__.py") if f in files), None)
                if hit is not None:
                    found.add(hit)
                    break
    return found


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


def _judge(done: CommandRun, rule: FailureRule) -> ProbeRun:
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
    run = ProbeRun("bad", signature, code, seconds)
    if rule.pattern is not None:
        matched = rule.pattern.search(done.stdout + "\n" + done.stderr) is not None
        return (
            run
            if matched
            else ProbeRun(
                "other", signature, code, seconds, f"fails differently: {signature}"[:300]
            )
        )
    return _rejudged(run, rule)


def _rejudged(run: ProbeRun, rule: FailureRule) -> ProbeRun:
    if run.outcome != "bad" or rule.type is None or rule.pattern is not None:
        return run
    if run.signature.split(":", 1)[0] == rule.type:
        return run
    return ProbeRun(
        "other",
        run.signature,
        run.exit_code,
        run.seconds,
        f"fails differently: {run.signature}"[:300],
    )


def _learned(rule: FailureRule, runs: Sequence[ProbeRun]) -> FailureRule:
    """The most common exception type of the failing runs (None when none failed)."""
    types = Counter(run.signature.split(":", 1)[0] for run in runs if run.outcome == "bad")
    if not types:
        return rule
    return FailureRule(type=types.most_common(1)[0][0])


def _settled(runs: Sequence[ProbeRun], repeat: int) -> bool:
    counts = Counter(run.outcome for run in runs)
    return counts.most_common(1)[0][1] * 2 > repeat


def _majority(runs: Sequence[ProbeRun], repeat: int) -> tuple[Verdict, str]:
    counts = Counter(run.outcome for run in runs)
    outcome, count = counts.most_common(1)[0]
    if count * 2 > repeat and outcome != "other":
        return outcome, ""
    others = sorted({run.note or run.signature for run in runs if run.outcome == "other"})
    if count * 2 > repeat:
        return "skip", "; ".join(others)[:300]
    return "skip", f"no majority of {repeat}: {_counts(runs)}" + (
        f" ({'; '.join(others)[:200]})" if others else ""
    )


def _runs_summary(probe: Probe) -> str:
    return _counts(probe.runs) or "no run"


def _counts(runs: Sequence[ProbeRun]) -> str:
    counts = Counter(run.outcome for run in runs)
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))


def _reproduce_line(recipe: HistoryRecipe | None, command: Sequence[str]) -> str:
    if recipe is None or not recipe.spec:
        return ""
    return (
        f"{YAML_PATH_ENV}={_quoted(str(recipe.directory))} prtoggle run -r {recipe.spec} -- "
        + " ".join(_quoted(part) for part in command)
    )


def _quoted(text: str) -> str:
    return shlex.quote(text)


def _joined(error_type: str | None, message: str | None) -> str:
    first = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    return f"{error_type}: {first}"[:200] if first else str(error_type)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _next_untested(bad: int, good: int, skipped: set[int]) -> int | None:
    """The untested index strictly between the bounds nearest their midpoint."""
    middle = (bad + good) // 2
    inside = [i for i in range(bad + 1, good) if i not in skipped]
    return min(inside, key=lambda i: (abs(i - middle), i)) if inside else None

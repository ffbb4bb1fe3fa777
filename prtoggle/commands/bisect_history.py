"""`prtoggle bisect --git A..B`: which commit of a range a command depends on, found by
reverting commits in the installed code (no checkout, no rebuild).

The run with nothing reverted comes first, traced: the commits that reach it (change
module-level code of a module it imported, or a function it ran: history_reach.py) are
searched first, every candidate only when those do not explain the failure. Each probe
runs COMMAND with a history recipe reverted (recipes/authoring/history.py), `repeat` times,
and takes the majority (history_probing.py makes a probe, history_verdicts.py says what
counts as the regression, history_ahead.py drafts the next ones meanwhile). Probes
whose revert does not apply, time out, crash, fail otherwise than --fingerprint, or whose
revert is partial and passes, are inconclusive (skips); the commits they leave undecided
are said as "cannot be ruled out", never silently dropped. Runs after the traced one are
forked from a warm worker that imported the run's modules once (history_runner.py).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prtoggle.commands.history_ahead import Ahead, fewer_collections
from prtoggle.commands.history_probes import (
    Bounds,
    HistoryAnswer,
    HistoryMode,
    Probe,
    Tier,
    next_untested,
    reproduce_line,
    runs_summary,
)
from prtoggle.commands.history_probing import ProbeMaking
from prtoggle.commands.history_reach import Reach, changed_units, commits_reaching
from prtoggle.commands.history_runner import (
    prepare_changed_files,
    probe_runner,
    widen_after_first_run,
)
from prtoggle.commands.history_verdicts import (
    FailureRule,
    ProbeRun,
)
from prtoggle.recipes.authoring.from_diff import forget_comparisons
from prtoggle.recipes.authoring.history import (
    HistoryCommit,
    HistoryRange,
    HistoryRecipe,
)
from prtoggle.revert.run_trace import RunTrace, read_traces
from prtoggle.runners.warm_client import CommandRunner, WarmWorker

__all__ = ["FailureRule", "HistoryAnswer", "HistoryBisect", "HistoryMode", "Probe", "ProbeRun"]


@dataclass
class HistoryBisect(ProbeMaking):
    """One search over `history`: runs COMMAND per probe and keeps every probe in order.

    The run with nothing reverted is traced (a fresh process); the candidates searched first
    are those reaching it (history_reach.py), every candidate when no trace was written or
    those do not explain the failure. Later runs are forked from a warm worker that imported
    the modules the traced run imported, unless `warm` is False.
    """

    history: HistoryRange
    command: tuple[str, ...]
    cache: Path
    repeat: int = 1
    timeout: float | None = None
    rule: FailureRule = field(default_factory=FailureRule)
    warm: bool = True
    on_probe: Callable[[int, Probe], None] = lambda number, probe: None
    on_note: Callable[[str], None] = lambda line: None
    probes: list[Probe] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reach: Reach | None = None
    not_landing: dict[str, str] = field(default_factory=dict)
    """Files whose revert did not land in a probe: later probes leave them as they are."""
    _memo: dict[str, Probe] = field(default_factory=dict)
    _runner: CommandRunner | None = None
    _worker: WarmWorker | None = None
    _tier: Tier = field(default_factory=lambda: Tier("candidates", []))
    _ahead: Ahead = field(default_factory=Ahead)
    _wider: list[Tier] = field(default_factory=list)

    def run(self, mode: HistoryMode) -> HistoryAnswer:
        """Search with `mode` ('ordered': binary search over suffixes; 'attribute': each
        candidate alone)."""
        candidates = list(self.history.candidates)
        if not candidates:
            return self._answer(
                mode, conclusion="no candidate commit in the range: nothing to revert"
            )
        with contextlib.ExitStack() as stack:
            stack.enter_context(fewer_collections())
            stack.callback(forget_comparisons)  # last: a process exiting with them took 1 s
            traces = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="prtoggle-")))
            stack.callback(self._ahead.close)  # after the runner closes: its runs have ended
            self._runner = self._start_runner(stack, traces)
            self._ahead.plan([("units", lambda: changed_units(self.history))])
            baseline = self._probe_nothing(trace=traces)
            trace = read_traces(traces)
            self._widen_preload(baseline, trace)
            if baseline.verdict != "good":
                return self._answer(
                    mode,
                    conclusion=(
                        f"with nothing reverted the command is {baseline.verdict}, expected "
                        f"good ({baseline.reason or runs_summary(baseline)}): it does not "
                        "depend on a commit of the range"
                    ),
                )
            tiers = self._tiers(candidates, trace)
            if self.reach is not None:
                tiered = [commit for tier in tiers for commit in tier.commits]
                prepare_changed_files(self._worker, tiered, located=self.reach.located)
            if mode == "attribute":
                return self._attribute(tiers[-2].commits if len(tiers) > 1 else candidates)
            return self._ordered(tiers)

    def _tiers(self, candidates: list[HistoryCommit], trace: RunTrace) -> list[Tier]:
        """The candidate sets searched in turn, each holding the last: the commits that
        change a function the run ran, those that reach it at all, every candidate."""
        if not trace.processes:
            self._note("reach: the run wrote no trace; every candidate is searched")
            return [Tier("every candidate", candidates)]
        units = self._ahead.take("units", lambda: None)
        self.reach = commits_reaching(self.history, trace, units=units)
        reaching, running = self.reach.reaching, self.reach.running
        self._note(
            f"reach: {len(reaching)} of {len(candidates)} candidates change code the run used, "
            f"{len(running)} a function it ran (searched first)"
        )
        tiers: list[Tier] = []
        for name, commits in (
            ("commits changing what ran", running),
            ("commits reaching the run", reaching),
            ("candidates", candidates),
        ):
            if commits and (not tiers or len(commits) > len(tiers[-1].commits)):
                tiers.append(Tier(name, commits, imported_only=commits is not candidates))
        return tiers

    def _start_runner(
        self, stack: contextlib.ExitStack[bool | None], traces: Path
    ) -> CommandRunner:
        """The runner of the probes (history_runner.py), its first run traced into `traces`."""
        runner, self._worker = probe_runner(
            stack,
            command=self.command,
            packages=self._package_tops(),
            trace_env=self._trace_env(traces),
            warm=self.warm,
        )
        return runner

    def _widen_preload(self, baseline: Probe, trace: RunTrace) -> None:
        """After a slow first run: later runs fork from a worker that also imported the
        modules of the range's packages the run imported (history_runner.py)."""
        if self._worker is None or baseline.verdict != "good":
            return
        seconds = max((run.seconds for run in baseline.runs), default=0.0)
        packages = self._package_tops()
        added = widen_after_first_run(self._worker, seconds=seconds, trace=trace, packages=packages)
        if added:
            self._note(
                f"warm worker: the first run took {seconds:.1f} s and imported {added} "
                f"module{'s' if added > 1 else ''} of the range's packages that the worker "
                "had not; it imports them too, for the probes"
            )

    def _ordered(self, tiers: list[Tier]) -> HistoryAnswer:
        """Binary search in the first tier whose commits, all reverted, make COMMAND fail;
        then the wider tiers' newer commits are checked, so the answer is the newest."""
        for number, tier in enumerate(tiers):
            self._tier, self._wider = tier, tiers[number + 1 :]
            bounds, everything = self._binary(tier.commits)
            if bounds is not None:
                return self._settle(bounds, tiers[number + 1 :])
            if number + 1 < len(tiers):
                following = tiers[number + 1]
                self._note(
                    f"reach: {len(tier.commits)} {tier.name} reverted: {everything.verdict}; "
                    f"next the {len(following.commits)} {following.name}"
                )
                continue
            why = everything.reason or runs_summary(everything)
            return self._answer(
                "ordered",
                suspects=self._suspects([everything]),
                conclusion=(
                    f"with the {len(tier.commits)} {tier.name} reverted the command is "
                    f"{everything.verdict} ({why}), expected bad: no commit of the range is "
                    "shown to be needed"
                ),
            )
        raise AssertionError("unreachable: the last tier answers")

    def _binary(self, candidates: list[HistoryCommit]) -> tuple[Bounds | None, Probe]:
        """Binary search over the suffixes of `candidates`; the suffix of all of them is
        probed last, only when no shorter one fails (None and that probe when it does not
        fail either)."""
        bad, good = 0, len(candidates)
        verdicts: dict[int, Probe] = {good: self.probes[0]}
        skipped: set[int] = set()
        while good - bad > 1:
            index = next_untested(bad, good, skipped)
            if index is None:
                break
            self._plan_after(candidates, index, bad=bad, good=good, skipped=skipped)
            probe = self._probe_suffix(candidates, index)
            verdicts[index] = probe
            if probe.verdict == "skip":
                skipped.add(index)
            elif probe.verdict == "bad":
                bad = index
            else:
                good = index
        if bad == 0:
            self._ahead.plan(self._found_jobs(candidates, candidates[0]))
            verdicts[0] = self._probe_suffix(candidates, 0)
            if verdicts[0].verdict != "bad":
                return None, verdicts[0]
        return Bounds(candidates, bad, good, verdicts), verdicts[bad]

    def _plan_after(
        self, candidates: list[HistoryCommit], index: int, *, bad: int, good: int, skipped: set[int]
    ) -> None:
        """Draft, while the probe of `index` runs, what the search asks next: either next
        suffix, or, where this probe closes the bounds, what settles the culprit it leaves
        (its own commit when it fails; when it passes, the oldest failing one, or the whole
        tier's suffix when none failed yet). A draft that the run's verdict leaves useless
        stops when the run ends (history_ahead.py)."""
        if_bad, if_good = next_untested(index, good, skipped), next_untested(bad, index, skipped)
        after: dict[str, list[tuple[str, Callable[[], HistoryRecipe]]]] = {"bad": [], "good": []}
        for verdict, following in (("bad", if_bad), ("good", if_good)):
            if following is not None:
                after[verdict].append(self._suffix_job(candidates, following))
        if if_bad is None:
            after["bad"] += self._found_jobs(candidates, candidates[index])
        if if_good is None:
            if bad == 0:
                after["good"].append(self._suffix_job(candidates, 0))
            after["good"] += self._found_jobs(candidates, candidates[bad])
        jobs = [*after["bad"], *after["good"]]
        alone_last = sorted(jobs, key=lambda job: job[0].startswith("alone:"))  # asked later
        useful = {verdict: [key for key, _ in planned] for verdict, planned in after.items()}
        self._ahead.plan(alone_last, after=useful)

    def _found_jobs(
        self, candidates: list[HistoryCommit], culprit: HistoryCommit
    ) -> list[tuple[str, Callable[[], HistoryRecipe]]]:
        """The drafts `_settle` asks for when `culprit` is found among `candidates`: the
        wider tier's newer commits, then the culprit alone."""
        jobs = []
        for tier in self._wider:
            if not tier.imported_only:
                break
            later = [c for c in tier.commits if self._newer(c, culprit)]
            if set(later) - set(candidates):
                index = tier.commits.index(later[0])
                jobs.append(self._suffix_job(tier.commits, index, imported_only=True))
                break
        return [*jobs, self._alone_job(culprit)]

    def _settle(self, bounds: Bounds, wider: list[Tier]) -> HistoryAnswer:
        """The wider tiers' commits newer than the culprit, all reverted: when that fails
        too, the culprit is among them (searched there); when it cannot be judged, they
        cannot be ruled out. Then the answer (a culprit confirmed alone, or the commits that
        cannot be ruled out)."""
        culprit = bounds.culprit
        suspects = [*bounds.undecided, *self._suspects(bounds.verdicts.values())]
        for number, tier in enumerate(wider):
            if not tier.imported_only:
                break  # every candidate: searched only when no reaching commit explains it
            later = [c for c in tier.commits if self._newer(c, culprit)]
            if not set(later) - set(bounds.candidates):
                continue
            self._tier, self._wider = tier, wider[number + 1 :]
            self._ahead.plan([self._alone_job(culprit)])
            probe = self._probe_suffix(tier.commits, tier.commits.index(later[0]))
            if probe.verdict == "bad":
                deeper, _ = self._binary(later)
                if deeper is not None:
                    return self._settle(deeper, wider[number + 1 :])
            elif probe.verdict == "skip":
                suspects += later
            else:
                suspects += self._suspects([probe])
        named = list(dict.fromkeys(c for c in suspects if c != culprit))
        if not bounds.decided:
            alone = self._probe_alone(culprit)
            if alone.verdict != "bad":
                return self._undecided(bounds, named)
        return self._found(bounds, named)

    def _newer(self, commit: HistoryCommit, than: HistoryCommit) -> bool:
        order = self.history.commits
        return order.index(commit) > order.index(than)

    def _found(self, bounds: Bounds, suspects: list[HistoryCommit]) -> HistoryAnswer:
        """The culprit, confirmed alone. One whose deciding probe was partial is named only
        when reverting it alone fails too; else it cannot be ruled out, with the others."""
        culprit, verdicts, bad = bounds.culprit, bounds.verdicts, bounds.bad
        newer = len(bounds.candidates) - bad - 1
        if bounds.decided:
            tail = (
                f"reverting only the {newer} newer ones does not"
                if newer
                else "with nothing reverted it passes"
            )
        else:
            tail = (
                f"the {len(bounds.undecided)} newer ones could not be judged; reverted alone "
                "it fails"
            )
        answer = self._answer(
            "ordered",
            culprits=[culprit],
            suspects=suspects,
            conclusion=(
                f"reverting {culprit.short} with the newer commits searched makes the command "
                f"fail; {tail}"
            ),
        )
        deciding = verdicts[bad]
        answer.deciding = [self.probes.index(deciding), self.probes.index(verdicts[bounds.good])]
        self._confirm(answer, culprit, deciding=deciding, alone=newer == 0)
        confirmed = answer.confirmation is not None and answer.confirmation.verdict == "bad"
        if confirmed or (deciding.recipe is not None and deciding.recipe.whole):
            return answer
        return self._undecided(
            bounds, suspects, why="its revert was partial and, alone, does not fail"
        )

    def _suspects(self, probes: Iterable[Probe]) -> list[HistoryCommit]:
        """The commits whose changes stayed in a partial probe that passed: they cannot be
        ruled out."""
        stayed = {commit.sha for probe in probes for commit in probe.stayed}
        return [c for c in self.history.candidates if c.sha in stayed]

    def _attribute(self, candidates: list[HistoryCommit]) -> HistoryAnswer:
        culprits: list[HistoryCommit] = []
        suspects: list[HistoryCommit] = []
        for commit in candidates:
            probe = self._probe_alone(commit)
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
            answer.reproduce = reproduce_line(alone.recipe, self.command)
        return answer

    def _undecided(
        self, bounds: Bounds, suspects: list[HistoryCommit], *, why: str = ""
    ) -> HistoryAnswer:
        bad, good, verdicts = bounds.bad, bounds.good, bounds.verdicts
        reasons = sorted({p.reason for i, p in verdicts.items() if bad < i < good and p.reason})
        named = list(dict.fromkeys([bounds.culprit, *suspects]))
        because = (
            f"{bounds.culprit.short} would be the culprit, but {why}"
            if why
            else f"the probes between them were inconclusive ({'; '.join(reasons) or 'skipped'})"
        )
        conclusion = (
            f"the culprit is one of {len(named)} commits that cannot be ruled out: {because}"
        )
        answer = self._answer("ordered", suspects=named, conclusion=conclusion)
        answer.deciding = [self.probes.index(verdicts[bad]), self.probes.index(verdicts[good])]
        return answer

    def _confirm(
        self, answer: HistoryAnswer, culprit: HistoryCommit, *, deciding: Probe, alone: bool
    ) -> None:
        """Revert the culprit alone: the confirmation the answer reports, and the command
        that reproduces the verdict (the culprit alone where that fails as the search did,
        else the deciding probe's set). The deciding probe is that confirmation already when
        it reverted the culprit alone, whole, and no newer candidate changes its files (its
        diff to the head is then the commit's own)."""
        later = self.history.candidates[self.history.candidates.index(culprit) + 1 :]
        touched = {file for commit in later for file in commit.files}
        whole = deciding.recipe is not None and deciding.recipe.whole
        if alone and whole and not touched & set(culprit.files):
            answer.confirmation = deciding
            answer.reproduce = reproduce_line(deciding.recipe, self.command)
            return
        probe = self._probe_alone(culprit)
        answer.confirmation = probe
        reproducer = probe.recipe if probe.verdict == "bad" else deciding.recipe
        answer.reproduce = reproduce_line(reproducer, self.command)

    def _answer(self, mode: HistoryMode, **values: Any) -> HistoryAnswer:
        return HistoryAnswer(
            mode, probes=self.probes, rule=self.rule, notes=self.notes, reach=self.reach, **values
        )

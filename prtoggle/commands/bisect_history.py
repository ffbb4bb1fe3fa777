"""`prtoggle bisect --git A..B`: which commit of a range a command depends on, found by
reverting commits in the installed code (no checkout, no rebuild).

The run with nothing reverted comes first, traced: the commits that reach it (change
module-level code of a module it imported, or a function it ran: history_reach.py) are
searched first, every candidate only when those do not explain the failure. Each probe
runs COMMAND with a history recipe reverted (recipes/authoring/history.py), `repeat` times,
and takes the majority (history_verdicts.py says what counts as the regression). Probes
whose revert does not apply, time out, crash, fail otherwise than --fingerprint, or whose
revert is partial and passes, are inconclusive (skips); the commits they leave undecided
are said as "cannot be ruled out", never silently dropped. Runs after the traced one are
forked from a warm worker that imported the run's modules once.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prtoggle.commands.history_ahead import Ahead
from prtoggle.commands.history_probes import (
    Bounds,
    HistoryAnswer,
    HistoryMode,
    Probe,
    Tier,
    first_line,
    next_untested,
    not_landed_files,
    reproduce_line,
    runs_summary,
)
from prtoggle.commands.history_reach import Reach, changed_units, commits_reaching
from prtoggle.commands.history_verdicts import (
    FailureRule,
    ProbeRun,
    failed_import,
    judge_run,
    majority,
    settled,
)
from prtoggle.errors import PrToggleError
from prtoggle.protocol import TRACE_ENV, YAML_PATH_ENV
from prtoggle.recipes.authoring.history import (
    HistoryCommit,
    HistoryRange,
    HistoryRecipe,
    commit_recipe,
    installed_module,
    stayed_commits,
    suffix_recipe,
)
from prtoggle.revert import child_report
from prtoggle.revert.run_trace import RunTrace, read_traces
from prtoggle.revert.toggle import child_env
from prtoggle.runners.child_process import run_child
from prtoggle.runners.command_imports import command_imports
from prtoggle.runners.output_tail import TAIL_BYTES
from prtoggle.runners.warm_client import (
    HEAVY_MODULES,
    CommandRunner,
    WarmWorker,
    command_runner,
)
from prtoggle.runners.warm_eligibility import env_without_revert

__all__ = ["FailureRule", "HistoryAnswer", "HistoryBisect", "HistoryMode", "Probe", "ProbeRun"]

_MOST_LEFT_OUT = 24
"""How many files a probe leaves as they are before it is called inconclusive."""
_MOST_RETRIES = 4
_WIDEN_AFTER_SECONDS = 3.0
"""A first run this long imported much that the warm worker did not preload: later runs
fork from a worker that preloads what it imported (of the range's packages)."""


@dataclass
class HistoryBisect:
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
        """The runner of the probes: a warm worker whose server starts importing now, while
        the range is read (plain children when not `warm`). It imports the heavy modules,
        pytest, and the package's modules the command's own files import at their top
        (runners/command_imports.py), traced into `traces` as the first run is."""
        if not self.warm:
            return stack.enter_context(command_runner(warm=False, output_limit=TAIL_BYTES))
        tops = self._package_tops() | {"pytest", "_pytest"}
        wanted = [
            name
            for name in ("pytest", *command_imports(self.command, cwd=Path.cwd()))
            if name.split(".", 1)[0] in tops
        ]
        base_env = {**env_without_revert(os.environ), TRACE_ENV: str(traces)}
        worker = stack.enter_context(
            WarmWorker(
                preload=(*HEAVY_MODULES, *wanted), base_env=base_env, output_limit=TAIL_BYTES
            )
        )
        worker.start()
        self._worker = worker
        return worker.run

    def _package_tops(self) -> set[str]:
        """The top-level packages (or modules) the candidates change."""
        return {c.files[0].split("/", 1)[0].removesuffix(".py") for c in self.history.candidates}

    def _widen_preload(self, baseline: Probe, trace: RunTrace) -> None:
        """After a slow first run: later runs fork from a worker that also imported the
        modules of the range's packages the run imported (in the run's order)."""
        seconds = max((run.seconds for run in baseline.runs), default=0.0)
        if self._worker is None or baseline.verdict != "good" or seconds < _WIDEN_AFTER_SECONDS:
            return
        tops = self._package_tops()
        names = [name for name in trace.names if name.split(".", 1)[0] in tops]
        env = {k: v for k, v in self._worker.base_env.items() if k != TRACE_ENV}
        added = self._worker.widen(names, base_env=env)
        if added:
            self._note(
                f"warm worker: the first run took {seconds:.1f} s importing what the worker "
                f"had not; {added} more modules preloaded for the probes"
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
        suffix, or (when this probe, failing, closes the bounds) what settles its commit."""
        following = [next_untested(index, good, skipped), next_untested(bad, index, skipped)]
        jobs = [self._suffix_job(candidates, i) for i in following if i is not None]
        if following[0] is None:
            jobs += self._found_jobs(candidates, candidates[index])
        self._ahead.plan(jobs)

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

    def _probe_nothing(self, *, trace: Path) -> Probe:
        runs = [self._run_once(None, trace=trace if n == 0 else None) for n in range(self.repeat)]
        verdict, reason = majority(runs, self.repeat)
        return self._keep("nothing", Probe("nothing reverted", (), verdict, tuple(runs), reason))

    def _probe_suffix(self, candidates: list[HistoryCommit], index: int) -> Probe:
        """Revert candidates[index:] (the files they change, as `git diff C^ B` has them); a
        file whose revert does not land at run time is left as it is (listed, so the probe
        is partial) and the probe run again without it."""
        oldest, newer = candidates[index], candidates[index:]
        plural = "s" if len(newer) != 1 else ""
        label = f"reverting {len(newer)} commit{plural} from {oldest.describe()}"
        changed = self._suffix_files(newer)
        left_out = {f: why for f, why in self.not_landing.items() if f in changed}
        for _attempt in range(_MOST_RETRIES + 1):
            probe = self._suffix_once(oldest, newer, label, left_out, changed)
            failed = not_landed_files(probe, newer) - set(left_out)
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

    def _suffix_files(
        self, newer: list[HistoryCommit], *, imported_only: bool | None = None
    ) -> set[str]:
        """The files a probe reverting `newer` reverts: those they change (within a tier of
        reaching commits, the current one unless `imported_only` says, those of modules the
        run imported only)."""
        changed = {file for commit in newer for file in commit.files}
        if imported_only is None:
            imported_only = self._tier.imported_only
        if imported_only and self.reach is not None:
            changed &= set(self.reach.located)  # a module the run never imported: no effect
        return changed

    def _suffix_job(
        self, candidates: list[HistoryCommit], index: int, *, imported_only: bool | None = None
    ) -> tuple[str, Callable[[], HistoryRecipe]]:
        oldest = candidates[index]
        changed = self._suffix_files(candidates[index:], imported_only=imported_only)
        left_out = {f: why for f, why in self.not_landing.items() if f in changed}
        return self._suffix_key(oldest, left_out, changed), lambda: suffix_recipe(
            self.history, oldest, cache=self.cache, left_out=left_out, only=changed
        )

    def _alone_job(self, commit: HistoryCommit) -> tuple[str, Callable[[], HistoryRecipe]]:
        return f"alone:{commit.sha}", lambda: commit_recipe(self.history, commit, cache=self.cache)

    @staticmethod
    def _suffix_key(oldest: HistoryCommit, left_out: dict[str, str], changed: set[str]) -> str:
        return f"suffix:{oldest.sha}:{sorted(left_out)}:{sorted(changed)}"

    def _suffix_once(
        self,
        oldest: HistoryCommit,
        newer: list[HistoryCommit],
        label: str,
        left_out: dict[str, str],
        changed: set[str],
    ) -> Probe:
        if left_out:
            noun = "file" if len(left_out) == 1 else "files"
            label = f"{label}, less {len(left_out)} {noun} whose revert did not land"
        key = f"suffix:{self._tier.name}:{oldest.sha}:{','.join(sorted(left_out))}"
        try:
            recipe = self._ahead.take(
                self._suffix_key(oldest, left_out, changed),
                lambda: suffix_recipe(
                    self.history, oldest, cache=self.cache, left_out=left_out, only=changed
                ),
            )
        except PrToggleError as exc:
            return self._refused(key, label, newer, f"cannot draft: {first_line(exc)}")
        reverted = changed - set(left_out)
        return self._probe(
            key, label, tuple(c.sha for c in newer), recipe, among=newer, files=reverted
        )

    def _probe_alone(self, commit: HistoryCommit) -> Probe:
        label = f"reverting {commit.describe()} alone"
        key, work = self._alone_job(commit)
        try:
            recipe = self._ahead.take(key, work)
        except PrToggleError as exc:
            return self._refused(key, label, [commit], f"cannot draft: {first_line(exc)}")
        return self._probe(
            key, label, (commit.sha,), recipe, among=[commit], files=set(commit.files)
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
        recipe: HistoryRecipe,
        *,
        among: Sequence[HistoryCommit],
        files: set[str],
    ) -> Probe:
        if key in self._memo:
            return self._memo[key]
        if recipe.nothing:
            reason = f"nothing to revert: {recipe.nothing}"
            return self._keep(key, Probe(label, reverted, "skip", (), reason, recipe))
        runs: list[ProbeRun] = []
        for _ in range(self.repeat):
            runs.append(self._run_once(recipe, files=files))
            if settled(runs, self.repeat):
                break
        verdict, reason = majority(runs, self.repeat)
        stayed: list[HistoryCommit] = []
        if recipe.not_reverted and verdict == "good":
            stayed = stayed_commits(self.history, recipe, among=among)
            named = ", ".join(c.short for c in stayed) or "some commits"
            listed = "; ".join(recipe.not_reverted)[:200]
            if stayed and len(stayed) < len(among):
                reason = f"partial: changes of {named} stay ({listed}); they cannot be ruled out"
            else:
                verdict = "skip"
                reason = (
                    f"partial: changes of {named} stay ({listed}); "
                    "a passing run cannot rule them out"
                )
        probe = Probe(label, reverted, verdict, tuple(runs), reason, recipe, tuple(stayed))
        return self._keep(key, probe)

    def _keep(self, key: str, probe: Probe) -> Probe:
        self._memo[key] = probe
        self.probes.append(probe)
        self.on_probe(len(self.probes), probe)
        return probe

    def _note(self, line: str) -> None:
        self.notes.append(line)
        self.on_note(line)

    def _run_once(
        self,
        recipe: HistoryRecipe | None,
        *,
        trace: Path | None = None,
        files: set[str] | None = None,
    ) -> ProbeRun:
        """One run of COMMAND with `recipe` reverted; traced into `trace` when given (a warm
        run's trace and the server's preload trace together cover what a fresh process
        would run)."""
        env = dict(os.environ)
        specs: list[str] = []
        if recipe is not None:
            known = env.get(YAML_PATH_ENV)
            env[YAML_PATH_ENV] = os.pathsep.join(
                [str(recipe.directory), *([known] if known else [])]
            )
            specs = [recipe.spec]
        env = child_env(specs, base=env)
        if trace is not None:
            env[TRACE_ENV] = str(trace)
        with child_report.collecting_reports(env) as (run_env, directory):
            runner = self._runner or run_child
            done = self._ahead.alongside(
                lambda: runner(list(self.command), env=run_env, timeout=self.timeout)
            )
            reports = child_report.read_reports(directory)
        if recipe is not None:
            pr = int(recipe.spec.rsplit(":", 1)[1])
            note = child_report.not_landed([pr], reports, command=self.command)
            if note is not None:
                return ProbeRun("other", "not reverted", done.returncode, done.seconds, note[:2000])
        run = judge_run(done, self.rule)
        partly = {file for file, _line in recipe.places} if recipe is not None else set()
        output = done.stdout + "\n" + done.stderr
        return self._coherent(run, output, (files or set()) - partly, partly)

    def _coherent(self, run: ProbeRun, output: str, files: set[str], partly: set[str]) -> ProbeRun:
        """A failing run whose failure is a package module, left as it is by the probe or
        reverted only in part (`partly`: a change of it stays), importing a name the probe's
        revert took away (a newer commit outside the probe added that import, or the
        statement that imported it the old way could not be reverted): not the regression
        but a revert that does not hold together. `files`: the files reverted whole."""
        site = failed_import(output) if run.outcome == "bad" else None
        if site is None:
            return run
        if site.name == site.module and installed_module(self.history, site.module) is False:
            note = (
                f"incoherent: the reverted code imports {site.module}, which the package at "
                "the range's head does not have (a commit of the range deleted or moved it; "
                "a revert cannot bring a module back)"
            )
            return ProbeRun("other", run.signature, run.exit_code, run.seconds, note[:300])
        changed = {file for commit in self.history.commits for file in commit.files}
        importers = [_package_file(frame, changed) for frame in site.frames]
        importer = next((file for file in reversed(importers) if file), None)
        if importer is None or importer in files:
            return run
        how = "reverted only in part" if importer in partly else "not reverted"
        note = (
            f"incoherent: the revert takes {site.name} from {site.module}, which {importer} "
            f"({how} by this probe) imports"
        )
        return ProbeRun("other", run.signature, run.exit_code, run.seconds, note[:300])

    def _answer(self, mode: HistoryMode, **values: Any) -> HistoryAnswer:
        return HistoryAnswer(
            mode, probes=self.probes, rule=self.rule, notes=self.notes, reach=self.reach, **values
        )


def _package_file(path: str, files: set[str]) -> str | None:
    """The file of `files` (relative to the source folder) that `path` is, if any."""
    return next((f for f in files if path == f or path.endswith(f"/{f}")), None)

"""How `bisect --git` makes one probe: the recipe (drafted ahead or now), the runs, the verdict.

`ProbeMaking` is the half of `HistoryBisect` (bisect_history.py) that turns "revert these
commits" into a judged Probe: the suffix or single-commit recipe (history_ahead.py may
have drafted it while the last probe ran), a file whose revert does not land left out
and the probe made again, each run of COMMAND (in the warm worker's helper thread), the
majority, a partial revert's commits that stay, and the import failures that show a revert
not holding together rather than the regression. Every probe is kept in order; one asked
twice is answered from memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from prtoggle.commands.history_ahead import Ahead
from prtoggle.commands.history_probes import Probe, Tier, first_line, not_landed_files
from prtoggle.commands.history_reach import Reach
from prtoggle.commands.history_verdicts import (
    FailureRule,
    ProbeRun,
    failed_import,
    judge_run,
    majority,
    settled,
)
from prtoggle.errors import PrToggleError
from prtoggle.protocol import TRACE_ENV, TRACE_PACKAGES_ENV, YAML_PATH_ENV
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
from prtoggle.revert.toggle import child_env
from prtoggle.runners.child_process import CommandRun, run_child
from prtoggle.runners.warm_client import CommandRunner

__all__ = ["ProbeMaking"]

_MOST_LEFT_OUT = 24
"""How many files a probe leaves as they are before it is called inconclusive."""
_MOST_RETRIES = 4


class ProbeMaking:
    """Probes of a search over `history` (the attributes are HistoryBisect's fields)."""

    history: HistoryRange
    command: tuple[str, ...]
    cache: Path
    repeat: int
    timeout: float | None
    rule: FailureRule
    on_probe: Callable[[int, Probe], None]
    on_note: Callable[[str], None]
    probes: list[Probe]
    notes: list[str]
    reach: Reach | None
    not_landing: dict[str, str]
    _memo: dict[str, Probe]
    _runner: CommandRunner | None
    _tier: Tier
    _ahead: Ahead

    def _package_tops(self) -> set[str]:
        """The top-level packages (or modules) the candidates change."""
        return {c.files[0].split("/", 1)[0].removesuffix(".py") for c in self.history.candidates}

    def _trace_env(self, directory: Path) -> dict[str, str]:
        """The variables that trace a run into `directory` (imports of other packages'
        modules untraced)."""
        return {
            TRACE_ENV: str(directory),
            TRACE_PACKAGES_ENV: ",".join(sorted(self._package_tops())),
        }

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

    def _verdict_of(self, done: CommandRun) -> str | None:
        """A probe's verdict as its one run says it ("bad", "good"; None: not yet known)."""
        outcome = judge_run(done, self.rule).outcome
        return outcome if outcome in ("bad", "good") else None

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
            env.update(self._trace_env(trace))
        with child_report.collecting_reports(env) as (run_env, directory):
            runner = self._runner or run_child
            done = self._ahead.alongside(
                lambda: runner(list(self.command), env=run_env, timeout=self.timeout),
                verdict=self._verdict_of if self.repeat == 1 and recipe is not None else None,
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
        taken = (
            f"module {site.module}"
            if site.name == site.module
            else f"{site.name} from {site.module}"
        )
        note = (
            f"incoherent: the revert takes {taken}, which {importer} ({how} by this probe) imports"
        )
        return ProbeRun("other", run.signature, run.exit_code, run.seconds, note[:300])


def _package_file(path: str, files: set[str]) -> str | None:
    """The file of `files` (relative to the source folder) that `path` is, if any."""
    return next((f for f in files if path == f or path.endswith(f"/{f}")), None)

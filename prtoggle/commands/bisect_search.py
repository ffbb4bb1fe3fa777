"""Find the fix(es) a failure depends on: attribution, ordered bisection and ddmin over reverts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from prtoggle.recipes.prs import join_prs

Verdict = Literal["good", "bad", "skip"]
"""What one run says: the command passed, failed, or could not be judged (a skip)."""


@dataclass(frozen=True)
class Judgement:
    """A verdict with its reason; `conflict` names PRs whose reverts cannot apply together."""

    verdict: Verdict
    reason: str = ""
    conflict: tuple[int, ...] = ()


Oracle = Callable[[tuple[int, ...]], "Verdict | Judgement"]
"""Runs the command with the given PRs reverted (sorted) and judges the run."""

Mode = Literal["attribute", "ordered", "ddmin"]
MODES: tuple[Mode, ...] = ("attribute", "ordered", "ddmin")


@dataclass(frozen=True)
class Probe:
    """One distinct run: which PRs were reverted and what the oracle said."""

    reverted: tuple[int, ...]
    verdict: Verdict
    judgement: Judgement | None = field(default=None, compare=False)


@dataclass(frozen=True)
class BisectResult:
    """The answer of one search: the culprit PRs, whether the search succeeded, and its runs."""

    mode: Mode
    found: bool
    culprits: tuple[int, ...]
    conclusion: str
    probes: tuple[Probe, ...]
    skipped: tuple[int, ...] = ()

    @property
    def runs(self) -> int:
        return len(self.probes)


def ordered_run_bound(count: int) -> int:
    """Most runs `ordered` needs for `count` candidates when no run is skipped."""
    return 2 + math.ceil(math.log2(count)) if count > 1 else 2


def attribute(candidates: Sequence[int], oracle: Oracle) -> BisectResult:
    """Revert each candidate alone; the culprits are those whose revert turns a good run bad."""
    memo = _MemoOracle(oracle)
    baseline = memo(())
    if baseline != "good":
        return memo.result("attribute", (), _baseline_problem(baseline))
    culprits: list[int] = []
    skipped: list[int] = []
    for pr in candidates:
        verdict = memo((pr,))
        if verdict == "bad":
            culprits.append(pr)
        elif verdict == "skip":
            skipped.append(pr)
    if culprits:
        conclusion = f"reverting {join_prs(culprits)} alone makes the command fail"
    else:
        conclusion = (
            "no single revert makes the command fail; several reverted together may "
            "(try --mode ddmin)"
        )
    return memo.result("attribute", tuple(culprits), conclusion, skipped=tuple(skipped))


def ordered(candidates: Sequence[int], oracle: Oracle) -> BisectResult:
    """Binary search over suffixes of `candidates` (oldest first) for the oldest needed revert.

    Reverting the suffix starting at the culprit is bad while reverting only the fixes newer
    than it is good. Two sanity runs (none and all reverted), then at most
    ceil(log2 N) runs while nothing is skipped.
    """
    memo = _MemoOracle(oracle)
    problem = _sanity_problem(memo, candidates)
    if problem:
        return memo.result("ordered", (), problem)
    bad_index, good_index = 0, len(candidates)
    skipped_indices: set[int] = set()
    while good_index - bad_index > 1:
        index = _next_untested(bad_index, good_index, skipped_indices)
        if index is None:
            suspects = tuple(candidates[bad_index:good_index])
            conclusion = (
                f"the culprit is one of {join_prs(suspects)}: the runs between them were skipped"
            )
            return memo.result("ordered", suspects, conclusion, found_override=False)
        verdict = memo(tuple(candidates[index:]))
        if verdict == "skip":
            skipped_indices.add(index)
        elif verdict == "bad":
            bad_index = index
        else:
            good_index = index
    culprit = candidates[bad_index]
    newer = candidates[bad_index + 1 :]
    conclusion = f"reverting {culprit} together with every newer fix makes the command fail"
    if newer:
        conclusion += f", reverting only the newer {join_prs(newer)} does not"
    return memo.result("ordered", (culprit,), conclusion)


def ddmin(candidates: Sequence[int], oracle: Oracle) -> BisectResult:
    """Zeller's ddmin: shrink the failing all-reverted set to a 1-minimal failing set."""
    memo = _MemoOracle(oracle)
    problem = _sanity_problem(memo, candidates)
    if problem:
        return memo.result("ddmin", (), problem)
    current = list(candidates)
    granularity = 2
    while len(current) >= 2:
        chunks = _split(current, granularity)
        failing_chunk = next((c for c in chunks if memo(tuple(c)) == "bad"), None)
        if failing_chunk is not None:
            current, granularity = failing_chunk, 2
            continue
        complements = [[pr for pr in current if pr not in chunk] for chunk in chunks]
        failing_complement = next((c for c in complements if memo(tuple(c)) == "bad"), None)
        if failing_complement is not None:
            current, granularity = failing_complement, max(granularity - 1, 2)
            continue
        if granularity >= len(current):
            break
        granularity = min(len(current), 2 * granularity)
    culprits = tuple(sorted(current))
    if len(culprits) == 1:
        conclusion = f"reverting {culprits[0]} alone makes the command fail"
    else:
        conclusion = (
            f"reverting {join_prs(culprits)} together makes the command fail; "
            "leaving any one of them applied does not"
        )
    return memo.result("ddmin", culprits, conclusion)


def run_search(mode: Mode, candidates: Sequence[int], oracle: Oracle) -> BisectResult:
    """Dispatch to the search named by `mode`; with no candidate, nothing is run."""
    if not candidates:
        conclusion = (
            "no candidate revert applies here (each was left out: see above): nothing to search"
        )
        return BisectResult(mode=mode, found=False, culprits=(), conclusion=conclusion, probes=())
    searches: dict[Mode, Callable[[Sequence[int], Oracle], BisectResult]] = {
        "attribute": attribute,
        "ordered": ordered,
        "ddmin": ddmin,
    }
    return searches[mode](candidates, oracle)


@dataclass
class _MemoOracle:
    """Calls the oracle once per distinct reverted set and keeps the probes in order."""

    oracle: Oracle
    verdicts: dict[frozenset[int], Verdict] = field(default_factory=dict)
    judgements: dict[frozenset[int], Judgement] = field(default_factory=dict)
    probes: list[Probe] = field(default_factory=list)

    def __call__(self, reverted: tuple[int, ...]) -> Verdict:
        key = frozenset(reverted)
        if key not in self.verdicts:
            ordered_prs = tuple(sorted(key))
            answer = self.oracle(ordered_prs)
            judgement = answer if isinstance(answer, Judgement) else Judgement(answer)
            self.verdicts[key] = judgement.verdict
            self.judgements[key] = judgement
            self.probes.append(Probe(ordered_prs, judgement.verdict, judgement))
        return self.verdicts[key]

    def result(
        self,
        mode: Mode,
        culprits: tuple[int, ...],
        conclusion: str,
        *,
        skipped: tuple[int, ...] = (),
        found_override: bool | None = None,
    ) -> BisectResult:
        found = bool(culprits) if found_override is None else found_override
        return BisectResult(
            mode=mode,
            found=found,
            culprits=culprits,
            conclusion=conclusion,
            probes=tuple(self.probes),
            skipped=skipped,
        )


def _sanity_problem(memo: _MemoOracle, candidates: Sequence[int]) -> str | None:
    baseline = memo(())
    if baseline != "good":
        return _baseline_problem(baseline)
    everything = memo(tuple(candidates))
    if everything == "skip":
        return _inconclusive(memo.judgements[frozenset(candidates)])
    if everything != "bad":
        return (
            f"with every candidate reverted the command is {everything}, expected bad: "
            "none of the candidate fixes is needed for it to pass"
        )
    return None


def _inconclusive(judgement: Judgement) -> str:
    """Why a skipped all-reverted run leaves the search without an answer."""
    start = "inconclusive: the run with every candidate reverted cannot be judged: "
    if judgement.conflict:
        return (
            f"{start}the reverts of {join_prs(judgement.conflict)} conflict: they cannot be "
            f"applied together ({judgement.reason}); bisect fewer candidates (-r) so that "
            "their reverts apply together"
        )
    return (
        f"{start}that run was skipped ({judgement.reason or 'exit status 125'}); the search "
        "needs it to be bad"
    )


def _baseline_problem(verdict: Verdict) -> str:
    return (
        f"with nothing reverted the command is {verdict}, expected good: "
        "the failure does not depend on reverting a fix"
    )


def _next_untested(bad_index: int, good_index: int, skipped: set[int]) -> int | None:
    """The untested index strictly between the bounds closest to their midpoint."""
    middle = (bad_index + good_index) // 2
    inside = [i for i in range(bad_index + 1, good_index) if i not in skipped]
    return min(inside, key=lambda i: (abs(i - middle), i)) if inside else None


def _split(items: list[int], parts: int) -> list[list[int]]:
    """`items` cut into `parts` contiguous chunks whose sizes differ by at most one."""
    chunks: list[list[int]] = []
    start = 0
    for index in range(parts):
        stop = start + (len(items) - start) // (parts - index)
        chunks.append(items[start:stop])
        start = stop
    return [chunk for chunk in chunks if chunk]

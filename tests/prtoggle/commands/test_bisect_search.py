"""Tests for prtoggle.commands.bisect_search: the three searches over fake oracles."""

from __future__ import annotations

from collections.abc import Callable, Collection

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prtoggle.commands.bisect_search import (
    BisectResult,
    Judgement,
    Probe,
    Verdict,
    attribute,
    ddmin,
    ordered,
    ordered_run_bound,
    run_search,
)

PRS = (21649, 22832, 24856, 26521, 27460)


def fails_when_all_reverted(
    needed: Collection[int], *, skip: Collection[int] = ()
) -> Callable[[tuple[int, ...]], Verdict]:
    """An oracle that is bad when every PR of `needed` is reverted, skip for `skip` sets."""

    def oracle(reverted: tuple[int, ...]) -> Verdict:
        if set(skip) & set(reverted):
            return "skip"
        return "bad" if set(needed) <= set(reverted) and needed else "good"

    return oracle


def test_attribute_names_the_single_revert_that_breaks_the_command() -> None:
    result = attribute(PRS, fails_when_all_reverted({24856}))
    assert result.found
    assert result.culprits == (24856,)
    assert result.runs == 1 + len(PRS)
    assert result.conclusion == "reverting 24856 alone makes the command fail"


def test_attribute_names_every_revert_that_breaks_alone() -> None:
    def oracle(reverted: tuple[int, ...]) -> Verdict:
        return "bad" if {21649, 27460} & set(reverted) else "good"

    assert attribute(PRS, oracle).culprits == (21649, 27460)


def test_attribute_reports_skips_and_suggests_ddmin_for_interactions() -> None:
    result = attribute(PRS, fails_when_all_reverted({22832, 26521}, skip={27460}))
    assert not result.found
    assert result.skipped == (27460,)
    assert result.conclusion == (
        "no single revert makes the command fail; several reverted together may (try --mode ddmin)"
    )


def test_attribute_stops_when_the_baseline_is_not_good() -> None:
    result = attribute(PRS, lambda reverted: "bad")
    assert not result.found
    assert result.probes == (Probe((), "bad"),)
    assert result.conclusion == (
        "with nothing reverted the command is bad, expected good: "
        "the failure does not depend on reverting a fix"
    )


def test_ordered_finds_the_oldest_needed_revert_with_sanity_runs_first() -> None:
    result = ordered(PRS, fails_when_all_reverted({22832, 26521}))
    assert result.culprits == (22832,)
    assert result.probes[:2] == (Probe((), "good"), Probe(PRS, "bad"))
    assert result.runs <= ordered_run_bound(len(PRS))
    assert result.conclusion == (
        "reverting 22832 together with every newer fix makes the command fail, "
        "reverting only the newer 24856, 26521, 27460 does not"
    )


def test_ordered_reports_when_reverting_everything_is_still_good() -> None:
    result = ordered(PRS, fails_when_all_reverted(set()))
    assert not result.found
    assert result.runs == 2
    assert result.conclusion == (
        "with every candidate reverted the command is good, expected bad: "
        "none of the candidate fixes is needed for it to pass"
    )


def test_ordered_steps_around_a_skipped_run() -> None:
    # the suffix starting at 24856 (index 2, the first midpoint) cannot be judged
    def oracle(reverted: tuple[int, ...]) -> Verdict:
        if reverted == PRS[2:]:
            return "skip"
        return "bad" if 26521 in reverted else "good"

    result = ordered(PRS, oracle)
    assert result.culprits == (26521,)
    assert Probe(PRS[2:], "skip") in result.probes


def test_ordered_gives_the_suspect_range_when_every_middle_run_is_skipped() -> None:
    def oracle(reverted: tuple[int, ...]) -> Verdict:
        if reverted in (PRS, ()):
            return "bad" if reverted else "good"
        return "skip"

    result = ordered(PRS, oracle)
    assert not result.found
    assert result.culprits == PRS
    assert result.conclusion == (
        "the culprit is one of 21649, 22832, 24856, 26521, 27460: "
        "the runs between them were skipped"
    )


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100])
def test_ordered_needs_at_most_log2_plus_two_runs(count: int) -> None:
    candidates = tuple(range(1000, 1000 + count))
    for culprit in candidates:
        result = ordered(candidates, fails_when_all_reverted({culprit}))
        assert result.culprits == (culprit,)
        assert result.runs <= ordered_run_bound(count)


@settings(deadline=None)  # pure and fast; no flaky deadline on a loaded machine
@given(
    candidates=st.lists(st.integers(1, 99999), min_size=1, max_size=64, unique=True),
    data=st.data(),
)
def test_ordered_finds_the_oldest_of_any_needed_set_within_the_bound(
    candidates: list[int], data: st.DataObject
) -> None:
    needed = data.draw(st.sets(st.sampled_from(candidates), min_size=1))
    result = ordered(candidates, fails_when_all_reverted(needed))
    oldest_needed = min(candidates.index(pr) for pr in needed)
    assert result.culprits == (candidates[oldest_needed],)
    assert result.runs <= ordered_run_bound(len(candidates))


def test_ordered_run_bound_values() -> None:
    assert [ordered_run_bound(n) for n in (1, 2, 3, 4, 5, 8, 9)] == [2, 3, 4, 4, 5, 5, 6]


def test_ddmin_finds_a_pair_that_only_fails_together() -> None:
    result = ddmin(PRS, fails_when_all_reverted({21649, 27460}))
    assert result.found
    assert result.culprits == (21649, 27460)
    assert result.conclusion == (
        "reverting 21649, 27460 together makes the command fail; "
        "leaving any one of them applied does not"
    )


def test_ddmin_finds_a_single_culprit() -> None:
    result = ddmin(PRS, fails_when_all_reverted({24856}))
    assert result.culprits == (24856,)
    assert result.conclusion == "reverting 24856 alone makes the command fail"


def test_ddmin_returns_one_of_two_alternative_culprits() -> None:
    def oracle(reverted: tuple[int, ...]) -> Verdict:
        return "bad" if {22832, 27460} & set(reverted) else "good"

    assert ddmin(PRS, oracle).culprits in ((22832,), (27460,))


def test_ddmin_never_runs_the_same_set_twice() -> None:
    result = ddmin(PRS, fails_when_all_reverted({22832, 24856, 27460}))
    reverted_sets = [frozenset(probe.reverted) for probe in result.probes]
    assert len(reverted_sets) == len(set(reverted_sets))


@settings(deadline=None)  # pure and fast; no flaky deadline on a loaded machine
@given(
    candidates=st.lists(st.integers(1, 99999), min_size=1, max_size=16, unique=True),
    data=st.data(),
)
def test_ddmin_result_is_one_minimal(candidates: list[int], data: st.DataObject) -> None:
    needed = data.draw(st.sets(st.sampled_from(candidates), min_size=1, max_size=4))
    oracle = fails_when_all_reverted(needed)
    result = ddmin(candidates, oracle)
    assert set(result.culprits) == needed
    for pr in result.culprits:
        assert oracle(tuple(p for p in result.culprits if p != pr)) == "good"


def test_ddmin_treats_skipped_runs_as_not_failing() -> None:
    def oracle(reverted: tuple[int, ...]) -> Verdict:
        if reverted == (21649, 22832):
            return "skip"
        return "bad" if {24856, 26521} <= set(reverted) else "good"

    assert ddmin(PRS, oracle).culprits == (24856, 26521)


def test_run_search_dispatches_on_mode() -> None:
    oracle = fails_when_all_reverted({26521})
    assert [run_search(mode, PRS, oracle).mode for mode in ("attribute", "ordered", "ddmin")] == [
        "attribute",
        "ordered",
        "ddmin",
    ]


@pytest.mark.parametrize("search", [ordered, ddmin])
def test_a_conflicting_all_reverted_set_is_inconclusive_naming_the_recipes(
    search: Callable[..., BisectResult],
) -> None:
    def oracle(reverted: tuple[int, ...]) -> Verdict | Judgement:
        if {24856, 26521} <= set(reverted):
            return Judgement("skip", reason="edit 1 of 1 matches nothing", conflict=(24856, 26521))
        return "bad" if 26521 in reverted else "good"

    result = search(PRS, oracle)
    assert not result.found
    assert result.runs == 2
    assert result.probes[1].judgement == Judgement(
        "skip", reason="edit 1 of 1 matches nothing", conflict=(24856, 26521)
    )
    assert result.conclusion == (
        "inconclusive: the run with every candidate reverted cannot be judged: the reverts of "
        "24856, 26521 conflict: they cannot be applied together (edit 1 of 1 matches nothing); "
        "bisect fewer candidates (-r) so that their reverts apply together"
    )


def test_a_skipped_all_reverted_run_is_inconclusive_never_none_needed() -> None:
    result = ordered(PRS, lambda reverted: "skip" if reverted else "good")
    assert not result.found
    assert result.conclusion == (
        "inconclusive: the run with every candidate reverted cannot be judged: that run was "
        "skipped (exit status 125); the search needs it to be bad"
    )


@pytest.mark.parametrize("mode", ["attribute", "ordered", "ddmin"])
def test_no_candidate_runs_nothing_and_says_so_instead_of_suggesting_another_mode(
    mode: str,
) -> None:
    def oracle(reverted: tuple[int, ...]) -> Verdict:
        raise AssertionError(f"ran {reverted}")

    result = run_search(mode, (), oracle)  # type: ignore[arg-type]
    assert (result.found, result.runs) == (False, 0)
    assert result.conclusion == (
        "no candidate revert applies here (each was left out: see above): nothing to search"
    )

"""Tests for commands.selections: what `-r` chooses, the notes it returns, an outer revert."""

from __future__ import annotations

import os

import pytest
from cli_fakes import (
    ANSWER_FIX,
    BROKEN_FIX,
    FIRST_HALF_FIX,
    FakeProject,
    absent_engine_collection,
    fake_project,
)

from prtoggle.commands.selections import (
    load_default_registry,
    outer_revert,
    parse_revert_options,
    qualified_specs,
    revert_selections,
)
from prtoggle.errors import UnknownPRError
from prtoggle.protocol import REVERT_ENV, RUN_REPORT_ENV

__all__ = ["fake_project"]  # the fixture, imported for pytest


def test_repeated_values_merge_in_order_and_all_wins(fake_project: FakeProject) -> None:
    registry = load_default_registry()
    requests = parse_revert_options([f"{ANSWER_FIX}", f"{FIRST_HALF_FIX},{ANSWER_FIX}"], registry)
    assert [request.pr for request in requests or ()] == [ANSWER_FIX, FIRST_HALF_FIX]
    assert parse_revert_options([f"{ANSWER_FIX}", "all"], registry) is None


def test_explicit_requests_return_their_selections_and_no_note(fake_project: FakeProject) -> None:
    registry = load_default_registry()
    choice = revert_selections([f"{ANSWER_FIX}"], registry, search_path=[])
    assert (choice.everything, choice.notes) == (False, ())
    assert qualified_specs(choice.selections) == (f"registry:{ANSWER_FIX}",)


def test_all_is_returned_with_everything_set_and_no_print(
    fake_project: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    choice = revert_selections(["all"], load_default_registry(), search_path=[])
    assert choice.everything
    assert f"registry:{BROKEN_FIX}" in qualified_specs(choice.selections)
    assert capsys.readouterr() == ("", "")


def test_an_outer_runs_revert_is_kept_with_its_prs_and_one_note(fake_project: FakeProject) -> None:
    registry = load_default_registry()
    environ = {REVERT_ENV: f"{ANSWER_FIX},{FIRST_HALF_FIX}", RUN_REPORT_ENV: "/tmp/reports"}
    outer = outer_revert(environ, command="bisect", registry=registry)
    assert (outer.spec, outer.prs) == (
        f"{ANSWER_FIX},{FIRST_HALF_FIX}",
        (ANSWER_FIX, FIRST_HALF_FIX),
    )
    assert outer.note == (
        f"prtoggle bisect: {REVERT_ENV}='{ANSWER_FIX},{FIRST_HALF_FIX}' of the outer prtoggle "
        f"run stays in force in every run (PRs {ANSWER_FIX}, {FIRST_HALF_FIX} reverted "
        "throughout, never a candidate)"
    )


@pytest.mark.parametrize("value", ["", "0", " "])
def test_no_revert_around_the_command_is_nothing_to_keep_or_say(
    fake_project: FakeProject, value: str
) -> None:
    environ = {REVERT_ENV: value, RUN_REPORT_ENV: "/tmp/reports"}
    outer = outer_revert(environ, command="coverage", registry=load_default_registry())
    assert (outer.spec, outer.prs, outer.note) == (None, (), None)


def test_a_revert_exported_by_hand_is_not_kept_and_the_note_says_so(
    fake_project: FakeProject,
) -> None:
    outer = outer_revert(
        {REVERT_ENV: str(ANSWER_FIX)}, command="coverage", registry=load_default_registry()
    )
    assert (outer.spec, outer.prs) == (None, ())
    assert outer.note == (
        f"prtoggle coverage: {REVERT_ENV}='{ANSWER_FIX}' from the environment is not kept: "
        "coverage chooses what each of its runs reverts (inside a prtoggle run the two would "
        "be composed)"
    )


def test_an_outer_revert_the_registry_does_not_know_is_an_error(fake_project: FakeProject) -> None:
    environ = {REVERT_ENV: "12345", RUN_REPORT_ENV: "/tmp/reports"}
    with pytest.raises(UnknownPRError, match="12345"):
        outer_revert(environ, command="bisect", registry=load_default_registry())


def _demo_collection_of_an_absent_package(
    fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Collection `demo` (absent_engine_collection) on PRTOGGLE_YAML_PATH."""
    demo = absent_engine_collection(fake_project)
    paths = [str(fake_project.registry_dir), str(demo)]
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", os.pathsep.join(paths))


def test_a_bare_number_leaves_out_a_collection_whose_package_is_not_importable_in_one_note(
    fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    _demo_collection_of_an_absent_package(fake_project, monkeypatch)
    registry = load_default_registry()
    choice = revert_selections([f"{ANSWER_FIX},{FIRST_HALF_FIX}"], registry, search_path=[])
    assert qualified_specs(choice.selections) == (
        f"registry:{ANSWER_FIX}",
        f"registry:{FIRST_HALF_FIX}",
    )
    assert choice.notes == (
        f"prtoggle: -r: left out demo/{ANSWER_FIX}, demo/{FIRST_HALF_FIX}: package not "
        f"importable here (name them as demo:{ANSWER_FIX}, demo:{FIRST_HALF_FIX} to revert "
        "them anyway)",
    )


def test_collection_colon_pr_still_reaches_a_collection_whose_package_is_not_importable(
    fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    _demo_collection_of_an_absent_package(fake_project, monkeypatch)
    choice = revert_selections([f"demo:{ANSWER_FIX}"], load_default_registry(), search_path=[])
    assert (qualified_specs(choice.selections), choice.notes) == ((f"demo:{ANSWER_FIX}",), ())

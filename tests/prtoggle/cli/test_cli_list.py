"""Tests for `prtoggle list`: every collection's recipes, whether each applies, JSON."""

from __future__ import annotations

import json

import pytest
from cli_fakes import (
    ANSWER_FIX,
    BROKEN_FIX,
    FIRST_HALF_FIX,
    HARMLESS_FIX,
    SECOND_HALF_FIX,
    TARGET_MODULE,
    FakeProject,
    fake_project,
    invoke,
    second_collection,
)

__all__ = ["fake_project"]  # the fixture, imported for pytest


def test_list_shows_every_fix_and_whether_its_revert_applies(fake_project: FakeProject) -> None:
    result = invoke("list", "--wide")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == [
        "PR",
        "COLLECTION",
        "MERGED",
        "COMPONENT",
        "SYMPTOM",
        "APPLIES",
        "TITLE",
    ]
    assert lines[1].split() == [
        str(ANSWER_FIX),
        "registry",
        "2026-03-01",
        TARGET_MODULE,
        "wrong-output",
        "yes",
        "fake",
        "fix",
        str(ANSWER_FIX),
    ]
    assert lines[2].split()[:6] == [
        str(BROKEN_FIX),
        "registry",
        "2026-01-01",
        TARGET_MODULE,
        "wrong-output",
        "stale",
    ]
    assert lines[6:] == [
        "stale: its match text is not in the installed code (`prtoggle rebase PR` proposes one)"
    ]


def test_list_says_out_of_range_apart_from_stale_in_a_word_and_a_footnote(
    fake_project: FakeProject,
) -> None:
    dist_info = fake_project.source_dir / "prtoggle_fake-2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Name: prtoggle-fake\nVersion: 2.3\n")
    recipe = fake_project.registry_dir / f"{ANSWER_FIX}.yaml"
    recipe.write_text("applies_to: prtoggle-fake>=1.0,<2.0\n" + recipe.read_text())
    result = invoke("list")
    rows = {line.split()[0]: line.split() for line in result.output.splitlines()[1:6]}
    assert (rows[str(ANSWER_FIX)][4], rows[str(BROKEN_FIX)][4]) == ("out-of-range", "stale")
    assert result.output.splitlines()[6:] == [
        "out-of-range: the installed version is outside the recipe's applies_to (not a failure)",
        "stale: its match text is not in the installed code (`prtoggle rebase PR` proposes one)",
    ]
    records = {r["pr"]: r for r in json.loads(invoke("list", "--json").output)}
    assert (records[ANSWER_FIX]["why_not"], records[BROKEN_FIX]["why_not"]) == (
        "out-of-range",
        "stale",
    )


def test_list_json_carries_metadata_and_problems(fake_project: FakeProject) -> None:
    result = invoke("list", "--json")
    assert result.exit_code == 0, result.output
    records = {record["pr"]: record for record in json.loads(result.output)}
    assert sorted(records) == [
        ANSWER_FIX,
        BROKEN_FIX,
        FIRST_HALF_FIX,
        SECOND_HALF_FIX,
        HARMLESS_FIX,
    ]
    answer = records[ANSWER_FIX]
    assert (answer["applies"], answer["problems"], answer["merged"]) == (True, [], "2026-03-01")
    assert answer["collection"] == "registry"
    assert answer["repro"] == "prtoggle_fake_scenario"
    assert answer["targets"] == [f"{TARGET_MODULE}.answer"]
    broken = records[BROKEN_FIX]
    assert broken["applies"] is False
    assert len(broken["problems"]) == 1
    assert broken["problems"][0].startswith(f"{TARGET_MODULE}.answer: ")
    assert broken["problems"][0].count(f"{TARGET_MODULE}.answer") == 1  # named once


def test_list_shows_each_collection_and_absent_packages(
    fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    second_collection(fake_project, monkeypatch)
    records = json.loads(invoke("list", "--json").output)
    assert [(r["pr"], r["collection"]) for r in records][-2:] == [
        (HARMLESS_FIX, "registry"),
        (ANSWER_FIX, "sglang"),
    ]
    sglang = records[-1]
    assert (sglang["title"], sglang["applies"]) == ("", None)
    text = invoke("list", "--collection", "sglang")
    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines()[1].split() == [
        str(ANSWER_FIX),
        "sglang",
        "-",
        "-",
        "absent",
        "-",
    ]
    unknown = invoke("list", "--collection", "vllm")
    assert (unknown.exit_code, unknown.stderr.splitlines()[0][:45]) == (
        2,
        "error: no recipe collection named 'vllm'; col",
    )

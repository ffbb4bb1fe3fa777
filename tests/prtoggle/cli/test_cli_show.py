"""Tests for `prtoggle show`: metadata and diffs per collection, errors, the capture note."""

from __future__ import annotations

import json
import os

import pytest
from cli_fakes import (
    ANSWER_FIX,
    BROKEN_FIX,
    FIRST_HALF_FIX,
    REGISTERED,
    TARGET_MODULE,
    FakeProject,
    fake_project,
    invoke,
    second_collection,
)

from prtoggle.cli.show import CAPTURE_NOTE

__all__ = ["fake_project"]  # the fixture, imported for pytest


def test_show_prints_metadata_and_the_revert_diff(fake_project: FakeProject) -> None:
    result = invoke("show", str(ANSWER_FIX))
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith(f"PR {ANSWER_FIX}: fake fix {ANSWER_FIX}\n")
    assert "  merged:    2026-03-01\n" in text
    assert "  expect:    WrongAnswer\n" in text
    assert f"  targets:   {TARGET_MODULE}.answer\n" in text
    assert "-    value = 42\n+    value = 41\n" in text
    assert CAPTURE_NOTE not in text


def test_show_json_includes_each_target_diff(fake_project: FakeProject) -> None:
    result = invoke("show", str(FIRST_HALF_FIX), "--json")
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.output)
    assert record["pr"] == FIRST_HALF_FIX
    assert record["acts_at_capture"] is False
    assert record["bench"] is None
    [diff] = record["diffs"]
    assert diff["target"] == f"{TARGET_MODULE}.first_half"
    assert "-    half = 21\n+    half = 0\n" in diff["diff"]


def test_show_json_names_the_benchmark_module_of_a_shipped_fix() -> None:
    result = invoke("show", "--collection", "fixes", "24856", "--json")
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.output)
    assert record["bench"] == "fixes.benchmarks.draft_extend_routing_cost"


def test_show_of_a_capture_time_fix_carries_the_capture_note() -> None:
    result = invoke("show", "--collection", "fixes", "26521")  # the shipped demo recipe
    assert result.exit_code == 0, result.output
    assert "  note:      acts at CUDA graph capture: revert before capture; a graph captured" in (
        result.output
    )
    assert CAPTURE_NOTE == (
        "acts at CUDA graph capture: revert before capture; a graph captured with the fix keeps it"
    )


def test_show_of_a_broken_revert_prints_metadata_then_the_error(
    fake_project: FakeProject,
) -> None:
    result = invoke("show", str(BROKEN_FIX))
    assert result.exit_code == 2
    assert result.stdout.startswith(f"PR {BROKEN_FIX}: fake fix {BROKEN_FIX}\n")
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.splitlines()) >= 1


def test_show_unknown_pr_is_a_one_line_error(fake_project: FakeProject) -> None:
    result = invoke("show", "12345")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(
        f"error: PR 12345 is not registered; registered PRs: {REGISTERED} "
    )
    assert len(result.stderr.splitlines()) == 1


def test_show_of_a_pr_in_two_collections_shows_one_section_per_collection(
    fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    second_collection(fake_project, monkeypatch)
    absent = (
        f"PR {ANSWER_FIX} (sglang): package absent_engine is not installed here, nor in "
        f"{os.getcwd()}, so there is no source to diff; `prtoggle check --source-root DIR` "
        "reads a source tree instead"
    )
    result = invoke("show", str(ANSWER_FIX))
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    first, second = result.stdout.split(f"\nPR {ANSWER_FIX}: ")
    assert first.startswith(f"PR {ANSWER_FIX}: fake fix {ANSWER_FIX}\n  collection: registry\n")
    assert "-    value = 42\n+    value = 41\n" in first
    assert second.startswith("(untitled)\n  collection: sglang\n")
    assert second.endswith(f"  not shown: {absent}\n")
    records = json.loads(invoke("show", str(ANSWER_FIX), "--json").stdout)
    assert [(r["collection"], len(r.get("diffs", [])), r.get("error")) for r in records] == [
        ("registry", 1, None),
        ("sglang", 0, absent),
    ]
    chosen = invoke("show", str(ANSWER_FIX), "--collection", "sglang", "--json")
    assert (chosen.exit_code, chosen.stdout, chosen.stderr) == (2, "", f"error: {absent}\n")
    shown = invoke("show", str(ANSWER_FIX), "--collection", "registry")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(
        f"PR {ANSWER_FIX}: fake fix {ANSWER_FIX}\n  collection: registry\n"
    )
    assert "collection: sglang" not in shown.stdout


GUARDS = (
    "test/unit/test_answer.py::TestAnswer::test_value",
    "test/unit/test_module_level.py",
)


def test_show_and_list_json_give_the_tests_a_fix_guards(fake_project: FakeProject) -> None:
    path = fake_project.registry_dir / f"{ANSWER_FIX}.yaml"
    path.write_text(path.read_text() + "guards:\n" + "".join(f"  - {g}\n" for g in GUARDS))
    shown = invoke("show", str(ANSWER_FIX))
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    at = lines.index("  guards:    2 tests the fix added or changed:")
    assert lines[at + 1 : at + 3] == [f"             {guard}" for guard in GUARDS]
    [record] = json.loads(invoke("show", str(ANSWER_FIX), "--json").output)
    assert record["guards"] == list(GUARDS)
    listed = {r["pr"]: r for r in json.loads(invoke("list", "--json").output)}
    assert (listed[ANSWER_FIX]["guards"], listed[FIRST_HALF_FIX]["guards"]) == (list(GUARDS), [])
    assert "guards" not in invoke("show", str(FIRST_HALF_FIX)).output


def test_show_says_which_modules_the_revert_makes_unimportable(fake_project: FakeProject) -> None:
    recipe = fake_project.registry_dir / f"{ANSWER_FIX}.yaml"
    recipe.write_text(recipe.read_text() + f"added_modules: [{TARGET_MODULE}_helpers]\n")
    text = invoke("show", str(ANSWER_FIX)).output
    assert f"  added:     {TARGET_MODULE}_helpers (not importable reverted)\n" in text
    [record] = json.loads(invoke("show", str(ANSWER_FIX), "--json").output)
    assert record["added_modules"] == [f"{TARGET_MODULE}_helpers"]
    [listed] = [r for r in json.loads(invoke("list", "--json").output) if r["pr"] == ANSWER_FIX]
    assert listed["added_modules"] == [f"{TARGET_MODULE}_helpers"]

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

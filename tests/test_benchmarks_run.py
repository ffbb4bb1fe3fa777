"""The benchmark scripts of bench/ still run against today's API (one tiny repetition each).

These are not timings: they catch a script broken by a rename before someone needs its figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.sglang


def test_the_import_hook_benchmark_runs_with_the_reverts_run_would_give_its_command() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "import_hook_cost.py"),
            *("-r", "26521", "--repeat", "1", "--module", "json", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["-r"] == "26521 -> 26521"
    assert report["in force (PR patched pending)"] == "26521 0 1"
    assert report["repetitions"] == 1
    assert report["ratio (median)"] > 0


def test_the_toggle_benchmark_times_each_fix_of_the_demo_engine() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "toggle_cost.py"), "--repeat", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    applied = sorted(key for key in figures if key.startswith("apply revert "))
    assert applied == [f"apply revert {pr} (us)" for pr in (21649, 22832, 24856, 26521, 27460)]
    assert figures["untouched function keeps its code object"] is True


def test_the_startup_benchmark_times_every_command_against_the_reference() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "startup.py"), "--repeat", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert list(report["commands"]) == [
        "reference",
        "python -c pass",
        "--help",
        "list",
        "run -r 27460",
        "run -r all",
        "rebase (per target)",
        "rebase (one process, per target)",
    ]
    assert report["rebase targets"] == 5
    assert report["commands"]["rebase (one process, per target)"]["goal"] == "<= 0.15 s"
    assert report["bytecode"].startswith("written by the warm-up run")
    assert report["commands"]["reference"]["ratio to reference"] == [1.0, 1.0, 1.0]
    assert report["commands"]["list"]["goal"] == "<= 3.6x"
    assert all(f["wall s"][1] > 0 for f in report["commands"].values())


def test_the_draft_scaling_benchmark_drafts_both_cases() -> None:
    command = [sys.executable, str(ROOT / "bench" / "draft_scaling.py")]
    result = subprocess.run(
        [*command, "--lines", "40", "--per-function", "10", "--repeat", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["edits drafted, the same in both"] is True
    assert figures["functions in the spread diff"] == 4
    assert figures["one function / spread, CPU"] > 0

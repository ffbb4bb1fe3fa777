"""bench/history_bisect.py on a real git repository built here: both tools name the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.prtoggle.history_fakes import history_repo

ROOT = Path(__file__).resolve().parent.parent
FIX = "fix: absval of negatives (#200)"

pytestmark = pytest.mark.slow


def test_the_history_benchmark_names_the_fix_with_both_tools_and_reports_them_side_by_side(
    tmp_path: Path,
) -> None:
    repo = history_repo(tmp_path / "repo")
    truth = tmp_path / "devset" / "truth"
    truth.mkdir(parents=True)
    fix = repo.shas[FIX]
    (truth / f"{fix}.json").write_text(
        json.dumps(
            {"sha": fix, "pr": 200, "kept": True, "guards": ["test/test_calc.py::test_absval"]}
        )
    )
    (truth / "dropped.json").write_text(json.dumps({"sha": "0" * 40, "kept": False}))
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "history_bisect.py"),
            *("--repo", str(repo.root), "--cache", str(tmp_path / "devset")),
            *("--branch", "HEAD", "--window", "8", "--work", str(tmp_path / "work")),
            *("--json", str(tmp_path / "out.json")),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [outcome] = json.loads((tmp_path / "out.json").read_text())
    assert outcome["status"] == "measured", outcome
    assert (outcome["prtoggle_answer"], outcome["prtoggle_culprit"]) == ("right", fix)
    assert (outcome["git_answer"], outcome["git_culprit"]) == ("right", fix)
    assert outcome["git_steps"] >= 2 and outcome["prtoggle_probes"] >= 3
    lines = done.stdout.splitlines()
    assert "prtoggle: 1 right, 0 wrong, 0 unsure, 0 error" in lines
    assert "git: 1 right, 0 wrong, 0 unsure, 0 error" in lines
    assert any(line.startswith("wall time: prtoggle ") for line in lines)

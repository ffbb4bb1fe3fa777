"""`prtoggle bisect` judges a run when its command exits and keeps only a tail of its output
(real processes: the CLI in a child whose peak memory is read from its rusage)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_fakes import ANSWER_FIX, TARGET_MODULE, FakeProject, fake_project

__all__ = ["fake_project"]

BACKGROUND_HOLDS_STDOUT = f"""
import subprocess, sys
import {TARGET_MODULE} as target
subprocess.Popen(["sleep", "40"])  # inherits stdout and stderr, outlives the program
sys.exit(0 if target.answer() == 42 else 1)
"""

PRINTS_150_MB = f"""
import sys
import {TARGET_MODULE} as target
line = "y" * 1023 + "\\n"
for _ in range(150 * 1024):
    sys.stdout.write(line)
print("score", 10 if target.answer() == 42 else 0)
"""

PEAK_OF_CHILD = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"status": done.returncode, "stdout": done.stdout, "peak_kb": peak}))
"""


def bisect(fake_project: FakeProject, *args: str) -> dict[str, object]:
    """The bisect CLI run in a child; its status, stdout and peak RSS (its children's too)."""
    argv = [sys.executable, "-c", PEAK_OF_CHILD, sys.executable, "-m", "prtoggle", "bisect"]
    done = subprocess.run(
        [*argv, "-r", str(ANSWER_FIX), *args],
        env=fake_project.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return dict(json.loads(done.stdout))


@pytest.mark.parametrize("cold", [True, False], ids=["cold", "warm"])
def test_a_run_is_judged_when_its_command_exits_not_when_a_background_process_does(
    fake_project: FakeProject, tmp_path: Path, cold: bool
) -> None:
    script = tmp_path / "background.py"
    script.write_text(textwrap.dedent(BACKGROUND_HOLDS_STDOUT))
    started = time.monotonic()
    result = bisect(fake_project, *(["--cold"] if cold else []), "--", sys.executable, str(script))
    assert time.monotonic() - started < 35  # each of 2 runs would wait 40 s for the sleep
    assert result["status"] == 0, result
    assert f"culprit: {ANSWER_FIX} (attribute, 2 runs)" in str(result["stdout"])


def test_150_mb_of_output_are_not_held_in_memory_and_the_metric_is_still_read(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    script = tmp_path / "chatty.py"
    script.write_text(textwrap.dedent(PRINTS_150_MB))
    metric = ["--metric", r"score (\d+)", "--threshold", "5"]
    result = bisect(fake_project, "--cold", *metric, "--", sys.executable, str(script))
    assert result["status"] == 0, result
    assert f"culprit: {ANSWER_FIX} (attribute, 2 runs)" in str(result["stdout"])
    assert int(str(result["peak_kb"])) < 150 * 1024  # was 475 MB holding it all

"""Code already running when a revert lands keeps the code it started with (a documented limit).

A real process: a generator suspended mid-way, and a call blocked in another thread, while
`prtoggle.reverted(N)` swaps their function's code; calls made after the swap run the
reverted code, and after the block the fixed code again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

WORKTREE = Path(__file__).resolve().parents[2]
PR = 99401
TARGET = """\
def numbers():
    for _ in range(3):
        yield "fixed"


def wait_then_answer(ready, go):
    ready.set()
    go.wait()
    return "fixed"
"""
RECIPE = f"""\
pr: {PR}
title: running code
patches:
  - target: running_target.numbers
    edits:
      - match: 'yield "fixed"'
        replacement: 'yield "reverted"'
  - target: running_target.wait_then_answer
    edits:
      - match: 'return "fixed"'
        replacement: 'return "reverted"'
"""
PROGRAM = f"""\
import threading

import prtoggle
import running_target

started = running_target.numbers()
first = next(started)
created = running_target.numbers()  # created, not started
ready, go, answers = threading.Event(), threading.Event(), []
waiter = threading.Thread(
    target=lambda: answers.append(running_target.wait_then_answer(ready, go))
)
waiter.start()
ready.wait()
with prtoggle.reverted({PR}):
    go.set()
    waiter.join()
    print("started:", first, *started)
    print("created:", *created)
    print("called now:", *running_target.numbers())
    print("blocked call:", *answers)
    print("new call:", running_target.wait_then_answer(threading.Event(), go))
    inside = running_target.numbers()
print("after:", *running_target.numbers())
print("created inside:", *inside)
"""


def test_a_generator_or_call_already_running_keeps_its_code_new_calls_are_reverted(
    tmp_path: Path,
) -> None:
    (tmp_path / "running_target.py").write_text(TARGET)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / f"{PR}.yaml").write_text(RECIPE)
    env = {**os.environ, "PRTOGGLE_YAML_PATH": str(tmp_path / "recipes")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(WORKTREE)])
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAM)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "started: fixed fixed fixed",
        "created: fixed fixed fixed",
        "called now: reverted reverted reverted",
        "blocked call: fixed",
        "new call: reverted",
        "after: fixed fixed fixed",
        "created inside: reverted reverted reverted",
    ]

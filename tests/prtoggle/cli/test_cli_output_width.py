"""Human output fits 100 columns: each command's text on the repo's own recipes (real
`prtoggle` processes; the shipped `fixes` collection, whose demo engine is importable here).
The progress lines on stderr are left out: they carry a child's failure whole."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

WIDTH = 100
TARGET_LINE = re.compile(r"^ {2}(targets:)? +[\w.]+$")
"""A `show` line holding one target alone: a dotted name is never broken (it may be longer)."""

COMMANDS = [
    ("list",),
    ("list", "--collection", "fixes"),
    ("check", "--collection", "fixes"),
    *[("show", pr, "--collection", "fixes") for pr in ("21649", "22832", "24856", "26521")],
    ("show", "27460", "--collection", "fixes"),
    ("bisect", "-r", "fixes:24856", "--", sys.executable, "-c", "pass"),
    ("repro", "--all"),
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_line_of_a_commands_human_output_fits_100_columns(argv: tuple[str, ...]) -> None:
    env = {key: value for key, value in os.environ.items() if key != "PRTOGGLE_YAML_PATH"}
    done = subprocess.run(
        [sys.executable, "-m", "prtoggle", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert lines
    wide = [line for line in lines if len(line) > WIDTH and not TARGET_LINE.match(line)]
    assert wide == []

"""Fake benchmark modules and fixes for the fix-cost and `prtoggle bench` tests."""

from __future__ import annotations

from cli_fakes import TARGET_MODULE, FakeProject

BENCH_MODULE = "prtoggle_fake_bench"
FAILING_BENCH_MODULE = "prtoggle_fake_failing_bench"
BENCH_FIX = 90101  # answer(): 42 -> 41; samples 2.0 ms fixed, 1.0/1.1/1.2 ms reverted
FAILING_BENCH_FIX = 90102  # first_half(): 21 -> 0; the reverted sample raises

BENCH_SOURCE = '''\
"""A fake paired benchmark: no timing, samples that say which code ran, toggled in process."""
import json
import sys

import prtoggle
import prtoggle_fake_target
from prtoggle.revert.toggle import active_reverts, is_reverted

args = sys.argv[1:]
if "--json" not in args or args[args.index("--repeat") + 1] != "3":
    raise SystemExit(f"unexpected arguments {args}")
pr = int(args[args.index("--pr") + 1])


def sample(index):
    return 2.0 if prtoggle_fake_target.answer() == 42 else 1.0 + 0.1 * index


fixed, reverted, in_force = [], [], []
for index in range(3):
    fixed.append(sample(index))
    with prtoggle.reverted(pr):
        in_force = [p for p in active_reverts() if is_reverted(p)]
        reverted.append(sample(index))
print("warming up")
print(json.dumps({
    "name": "fake", "timed": "prtoggle_fake_target.answer", "unit": "ms", "median": 2.0,
    "samples": fixed, "shape": {"bs": 4, "device": args[args.index("--device") + 1]},
    "in_force": list(active_reverts()), "extras": {"buffer_bytes": 2048}, "note": "fake note",
    "reverted": {"pr": pr, "samples": reverted, "in_force": in_force, "error": None,
                 "extras": {"buffer_bytes": 1024}},
}))
'''

FAILING_BENCH_SOURCE = '''\
"""A fake paired benchmark whose reverted code cannot run: the reverted sample raises."""
import json
import sys

import prtoggle
import prtoggle_fake_target
from prtoggle.revert.toggle import active_reverts

args = sys.argv[1:]
pr = int(args[args.index("--pr") + 1])


def sample():
    half = prtoggle_fake_target.first_half()
    if half != 21:
        raise ValueError(f"first_half() is {half}: the reverted path cannot run here")
    return 0.5


error = None
try:
    with prtoggle.reverted(pr):
        sample()
except ValueError as exc:
    error = f"{type(exc).__name__}: {exc}"
print(json.dumps({
    "name": "fake_failing", "timed": "prtoggle_fake_target.first_half", "unit": "ms",
    "median": 0.5, "samples": [sample(), sample()], "shape": {},
    "in_force": list(active_reverts()),
    "reverted": {"pr": pr, "samples": [], "in_force": [], "error": error, "extras": {}},
}))
'''


def add_bench_fixes(project: FakeProject) -> None:
    """Two fixes with a `bench:` module each, next to the fake project's fixes."""
    (project.source_dir / f"{BENCH_MODULE}.py").write_text(BENCH_SOURCE)
    (project.source_dir / f"{FAILING_BENCH_MODULE}.py").write_text(FAILING_BENCH_SOURCE)
    for pr, function, match, replacement, module in (
        (BENCH_FIX, "answer", "value = 42", "value = 41", BENCH_MODULE),
        (FAILING_BENCH_FIX, "first_half", "half = 21", "half = 0", FAILING_BENCH_MODULE),
    ):
        (project.registry_dir / f"{pr}.yaml").write_text(
            f"pr: {pr}\ntitle: bench fix {pr}\nbench: {module}\n"
            f"patches:\n  - target: {TARGET_MODULE}.{function}\n    edits:\n"
            f'      - match: "{match}"\n        replacement: "{replacement}"\n'
        )

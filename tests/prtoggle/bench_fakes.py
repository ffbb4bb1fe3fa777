"""Fake benchmark modules and fixes for the fix-cost and `prtoggle bench` tests."""

from __future__ import annotations

from cli_fakes import TARGET_MODULE, FakeProject

BENCH_MODULE = "prtoggle_fake_bench"
FAILING_BENCH_MODULE = "prtoggle_fake_failing_bench"
BENCH_FIX = 90101  # answer(): 42 -> 41; the bench reports 2.0 ms fixed, 1.0 ms reverted
FAILING_BENCH_FIX = 90102  # first_half(): 21 -> 0; the bench raises when reverted

BENCH_SOURCE = '''\
"""A fake benchmark: no timing, a median that says which code ran (2.0 fixed, 1.0 reverted)."""
import json
import sys

import prtoggle
import prtoggle_fake_target
from prtoggle.toggle import active_reverts

prtoggle.maybe_revert_pr_fix()
args = sys.argv[1:]
if "--json" not in args or args[args.index("--repeat") + 1] != "3":
    raise SystemExit(f"unexpected arguments {args}")
median = 2.0 if prtoggle_fake_target.answer() == 42 else 1.0
print("warming up")
print(json.dumps({
    "name": "fake", "timed": "prtoggle_fake_target.answer", "unit": "ms", "median": median,
    "samples": [median] * 3, "shape": {"bs": 4, "device": args[args.index("--device") + 1]},
    "reverted": list(active_reverts()), "extras": {"buffer_bytes": int(median * 1024)},
    "note": "fake note",
}))
'''

FAILING_BENCH_SOURCE = '''\
"""A fake benchmark whose reverted code cannot run: it raises, as a real one would."""
import json

import prtoggle
import prtoggle_fake_target
from prtoggle.toggle import active_reverts

prtoggle.maybe_revert_pr_fix()
half = prtoggle_fake_target.first_half()
if half != 21:
    raise ValueError(f"first_half() is {half}: the reverted path cannot run here")
print(json.dumps({
    "name": "fake_failing", "timed": "prtoggle_fake_target.first_half", "unit": "ms",
    "median": 0.5, "samples": [0.5], "shape": {}, "reverted": list(active_reverts()),
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

"""Where `prtoggle repro --all` spends its time: process start, imports, first run, warm run.

Usage: ``python bench/repro_time.py [--device cpu|cuda] [--json]``. For each shipped
fix's scenario, a fresh child process measures (fixed code, detection variables set as
`repro` sets them):

- ``start``: interpreter start-up (``python -c pass``, measured separately);
- ``imports``: importing the scenario module (torch, triton, the stack);
- ``first run``: the scenario's first ``run()``: kernel JIT/compile and CUDA context;
- ``warm run``: a second ``run()`` in the same process: the scenario itself.

Then the wall time of ``prtoggle repro --all`` itself (children in parallel).

With ``--ratio-rounds N`` it then measures, N rounds interleaved in one run so that the
load of the machine weighs on each alike: the wall time of ``python -c "import torch"``,
of ``prtoggle repro --all`` (warm worker) and of ``prtoggle repro --all --cold`` (a fresh
process per scenario, the behaviour before the worker), printed side by side with their
ratios to ``import torch``; and the time of each run of a bisect over a Python check that
imports the engine (``prtoggle bisect --json``, warm and ``--cold``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from prtoggle.protocol import DETECTION_ENV
from prtoggle.recipes.registry import default_registry

CHILD = """
import importlib, json, sys, time
t0 = time.perf_counter()
module = importlib.import_module(sys.argv[1])
from fixes.scenarios.common import ScenarioOptions
t1 = time.perf_counter()
options = ScenarioOptions(device=sys.argv[2])
first = module.run(options)
t2 = time.perf_counter()
second = module.run(options)
t3 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "first run": t2 - t1, "warm run": t3 - t2,
                  "outcome": [first.outcome, second.outcome]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--ratio-rounds", type=int, default=0, metavar="N")
    parser.add_argument("--skip-phases", action="store_true", help="only the ratio rounds")
    parser.add_argument("--prs", nargs="*", default=None, help="ratio rounds: these, not --all")
    args = parser.parse_args()
    if args.skip_phases:
        _ratio_rounds(args.ratio_rounds, device=args.device, as_json=args.json, prs=args.prs)
        return
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_DEBUG_REVERT_PR"}
    env.update(DETECTION_ENV)
    rows = {"python start": _wall([sys.executable, "-c", "pass"], env)}
    for fix in default_registry().by_merge_date():
        if fix.repro is None:
            continue
        done = subprocess.run(
            [sys.executable, "-c", CHILD, fix.repro, args.device],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        rows[str(fix.pr)] = json.loads(done.stdout.strip().splitlines()[-1])
    rows["prtoggle repro --all (wall)"] = _wall(
        [sys.executable, "-m", "prtoggle", "repro", "--all", "--device", args.device], env
    )
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"device: {args.device}; python start {rows['python start']:.2f} s")
    print(f"{'PR':>6} {'imports s':>10} {'first run s':>12} {'warm run s':>11}  outcomes")
    for key, row in rows.items():
        if isinstance(row, dict):
            print(
                f"{key:>6} {row['imports']:10.2f} {row['first run']:12.2f} "
                f"{row['warm run']:11.2f}  {'/'.join(row['outcome'])}"
            )
    print(f"prtoggle repro --all: {rows['prtoggle repro --all (wall)']:.1f} s wall")
    if args.ratio_rounds:
        _ratio_rounds(args.ratio_rounds, device=args.device, as_json=False, prs=args.prs)


BISECT_CHECK = "import fixes.attention.trtllm_mha_backend"
"""A Python check that imports the engine (torch included) and does nothing else."""


def _ratio_rounds(rounds: int, *, device: str, as_json: bool, prs: list[str] | None) -> None:
    """`rounds` interleaved rounds of import torch / repro warm / repro cold / bisect runs."""
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_DEBUG_REVERT_PR"}
    selection = prs if prs else ["--all"]
    repro = [sys.executable, "-m", "prtoggle", "repro", *selection, "--device", device]
    bisect = [sys.executable, "-m", "prtoggle", "bisect", "--json", "-r", "26521,24856"]
    check = ["--", sys.executable, "-c", BISECT_CHECK]
    samples: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, argv in (
            ("import torch", [sys.executable, "-c", "import torch"]),
            (f"repro {' '.join(selection)} (warm)", repro),
            (f"repro {' '.join(selection)} --cold", [*repro, "--cold"]),
        ):
            samples.setdefault(name, []).append(_wall(argv, env))
        for name, extra in (("bisect run (warm)", []), ("bisect run (--cold)", ["--cold"])):
            samples.setdefault(name, []).extend(_bisect_run_seconds([*bisect, *extra, *check], env))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = medians["import torch"]
    if as_json:
        print(json.dumps({"samples": samples, "medians": medians}, indent=2))
        return
    print(f"\n{rounds} interleaved rounds; median wall s, and ratio to `import torch`:")
    for name, value in medians.items():
        spread = f"{min(samples[name]):.2f}-{max(samples[name]):.2f}"
        print(f"  {name:36} {value:7.2f} s  ({spread})  x{value / base:5.1f}")


def _bisect_run_seconds(argv: list[str], env: dict[str, str]) -> list[float]:
    done = subprocess.run(argv, env=env, check=False, capture_output=True, text=True)
    return [probe["seconds"] for probe in json.loads(done.stdout)["probes"]]


def _wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()

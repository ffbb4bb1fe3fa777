"""`prtoggle coverage` on a real suite with the warm worker (the default) against `--cold`.

Usage: ``python bench/warm_vs_cold.py [--suite NAME ...] [--repeat N] [--json]``.

Suites (run from this checkout's root, as the README does):

- `readme`: the README's coverage example, `prtoggle coverage --collection fixes -r 24856
  -- python -m pytest -q tests/regression/test_pr24856_draft_extend_routing.py` (2 runs of
  the suite: plain and reverted).
- `regression`: the CI's step, `prtoggle coverage --collection fixes -- python -m pytest -q
  tests/regression` (6 runs: plain and one per fix).

Each round runs the suite's command once warm and once with `--cold`, the order swapped
from round to round, and takes the ratio warm / cold of that round's wall times (below 1:
warm is faster); CPU time (user+sys of the command and every process it waited for) from
os.wait4. Each command's exit status must be 0 and its stderr is kept: a line naming the
warm worker (it stepped aside) is reported. The load average is printed before and after:
on a shared machine the per-round ratios are the figures to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITES = {
    "readme": [
        *("coverage", "--collection", "fixes", "-r", "24856", "--"),
        *("python", "-m", "pytest", "-q"),
        "tests/regression/test_pr24856_draft_extend_routing.py",
    ],
    "regression": [
        *("coverage", "--collection", "fixes", "--"),
        *("python", "-m", "pytest", "-q", "tests/regression"),
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", nargs="+", choices=sorted(SUITES), default=["readme"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()
    results = {name: _rounds(SUITES[name], args.repeat) for name in args.suite}
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}",
        "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "suites": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"machine {report['machine']}; load average {report['load_average']}")
    for name, figures in results.items():
        print(
            f"{name}: warm {figures['warm_s']} s, cold {figures['cold_s']} s (medians); "
            f"warm/cold {figures['ratio']} (quartiles {figures['ratio_quartiles']}); "
            f"CPU warm {figures['warm_cpu_s']} s, cold {figures['cold_cpu_s']} s"
        )
        for line in figures["warm_lines"]:
            print(f"  warm said: {line}")


def _rounds(command: list[str], repeat: int) -> dict[str, object]:
    walls: dict[str, list[float]] = {"warm": [], "cold": []}
    cpus: dict[str, list[float]] = {"warm": [], "cold": []}
    said: set[str] = set()
    for index in range(repeat):
        order = ("warm", "cold") if index % 2 == 0 else ("cold", "warm")
        for mode in order:
            argv = [*command[:1], *(["--cold"] if mode == "cold" else []), *command[1:]]
            wall, cpu, stderr = _timed(argv)
            walls[mode].append(wall)
            cpus[mode].append(cpu)
            if mode == "warm":
                said.update(line for line in stderr.splitlines() if "warm" in line)
        print(f"round {index + 1}/{repeat}", file=sys.stderr)
    ratios = [w / c for w, c in zip(walls["warm"], walls["cold"], strict=True)]
    return {
        "warm_s": round(statistics.median(walls["warm"]), 1),
        "cold_s": round(statistics.median(walls["cold"]), 1),
        "warm_cpu_s": round(statistics.median(cpus["warm"]), 1),
        "cold_cpu_s": round(statistics.median(cpus["cold"]), 1),
        "ratio": round(statistics.median(ratios), 3),
        "ratio_quartiles": [round(q, 3) for q in _quartiles(ratios)],
        "ratios": [round(r, 3) for r in ratios],
        "warm_lines": sorted(said),
    }


def _timed(argv: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of `prtoggle ARGV` run from the checkout's root; its stderr."""
    script = Path(sys.executable).with_name("prtoggle")
    start = time.perf_counter()
    process = subprocess.Popen(
        [str(script), *argv],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"prtoggle {' '.join(argv)} exited {process.returncode}:\n{stderr}")
    return wall, usage.ru_utime + usage.ru_stime, stderr


def _quartiles(values: list[float]) -> list[float]:
    if len(values) < 2:
        return [values[0], values[0]]
    quartiles = statistics.quantiles(values, n=4)
    return [quartiles[0], quartiles[2]]


if __name__ == "__main__":
    main()

"""CPU cost of `prtoggle run -r SPEC` on a big import: the bootstrap plus the import hook.

Usage: ``python bench/import_hook_cost.py [-r SPEC] [--repeat N] [--module NAME] [--json]``.

Runs, interleaved (the order alternates every repetition), fresh children of
`python -c "import NAME"` (default: sglang.srt.managers.scheduler, ~7,000 imports):
plain, and the same under prtoggle's start-up hook with SPEC's reverts requested (the
environment `prtoggle run -r SPEC` gives its command). A child's CPU time is its
user+sys from os.wait4, the ratio is taken per repetition (reverting / plain), and the
median, quartiles and range of the ratios are reported. Each repetition also times
`python -c pass` both ways: the start-up hook's own cost (importing prtoggle, loading
the recipes, holding the PRs) without the import it watches. Before timing, one reverting child
prints which PRs are in force, patched and pending, so the figure is known to be taken
with the reverts held. On a machine without torchvision or sgl_kernel (no GPU build),
sglang imports with the stand-ins of tests/sglang/stubs on PYTHONPATH (both kinds of
child); the script says so.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from machine_info import cpu_model, distribution_version

from prtoggle.commands.run import run_environment
from prtoggle.protocol import REVERT_ENV

REPO = Path(__file__).resolve().parent.parent
STUBS = REPO / "tests" / "sglang" / "stubs"
SHOW_REVERTS = """\
from prtoggle.revert import toggle
for pr in toggle.active_reverts():
    print(pr, len(toggle.patched_targets(pr)), len(toggle.pending_targets(pr)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-r", "--revert", default="all", metavar="SPEC")
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--module", default="sglang.srt.managers.scheduler")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    plain = _plain_env()
    command = [sys.executable, "-c", f"import {args.module}"]
    notes: list[str] = []
    prs, reverting = run_environment([args.revert], command=command, notes=notes, base=plain)
    for note in notes:
        print(note, file=sys.stderr)
    in_force = _reverts_in_force(args.module, reverting)
    _cpu_seconds(f"import {args.module}", plain)  # warm the file cache for both kinds
    _cpu_seconds(f"import {args.module}", reverting)
    pairs = []
    load_before = os.getloadavg()
    for index in range(args.repeat):
        order = [("plain", plain), ("reverting", reverting)]
        if index % 2:
            order.reverse()
        times = {name: _cpu_seconds(f"import {args.module}", env) for name, env in order}
        times.update({f"{name} pass": _cpu_seconds("pass", env) for name, env in order})
        pairs.append(times)
        ratio = times["reverting"] / times["plain"]
        print(f"repetition {index + 1}/{args.repeat}: ratio {ratio:.4f}", file=sys.stderr)
    report = _report(args, prs, in_force, pairs, load_before)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        print(f"{key:34s} {value}")


def _plain_env() -> dict[str, str]:
    """This environment, SGLANG_DEBUG_REVERT_PR removed, the sglang stand-ins added if needed."""
    env = {key: value for key, value in os.environ.items() if key != REVERT_ENV}
    if any(importlib.util.find_spec(name) is None for name in ("torchvision", "sgl_kernel")):
        print(f"torchvision or sgl_kernel missing: sglang imports with {STUBS} on PYTHONPATH")
        paths = [str(STUBS), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _reverts_in_force(module: str, env: dict[str, str]) -> list[str]:
    """`PR patched pending` for each PR in force after the import, from one reverting child."""
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", f"import {module}\n{SHOW_REVERTS}"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"the reverting child failed ({result.returncode}):\n{result.stderr}")
    return result.stdout.splitlines()


def _cpu_seconds(code: str, env: dict[str, str]) -> float:
    """user+sys seconds of one child `python -c CODE` (os.wait4)."""
    process = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", code],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        sys.exit(f"child `python -c {code!r}` failed with status {process.returncode}")
    return usage.ru_utime + usage.ru_stime


def _report(
    args: argparse.Namespace,
    prs: tuple[int, ...],
    in_force: list[str],
    pairs: list[dict[str, float]],
    load_before: tuple[float, float, float],
) -> dict[str, object]:
    ratios = sorted(pair["reverting"] / pair["plain"] for pair in pairs)
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "machine": f"{cpu_model()} ({platform.machine()}), {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}",
        "load average (before, after)": f"{load_before[0]:.2f}, {os.getloadavg()[0]:.2f}",
        "date (UTC)": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "module": args.module,
        "sglang": distribution_version("sglang"),
        "-r": f"{args.revert} -> {','.join(map(str, prs))}",
        "in force (PR patched pending)": "; ".join(in_force),
        "repetitions": len(pairs),
        "plain CPU s (median)": round(statistics.median(p["plain"] for p in pairs), 3),
        "reverting CPU s (median)": round(statistics.median(p["reverting"] for p in pairs), 3),
        "ratio (median)": round(statistics.median(ratios), 4),
        "ratio (quartiles)": f"{quartiles[0]:.4f}-{quartiles[2]:.4f}",
        "ratio (range)": f"{ratios[0]:.4f}-{ratios[-1]:.4f}",
        "start-up alone, `-c pass` CPU s (median plain, reverting)": (
            f"{statistics.median(p['plain pass'] for p in pairs):.3f}, "
            f"{statistics.median(p['reverting pass'] for p in pairs):.3f}"
        ),
    }


if __name__ == "__main__":
    main()

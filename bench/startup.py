"""CLI start-up: `prtoggle --help`, `list`, `run`, `rebase` timed against `import click, yaml`.

Usage: ``python bench/startup.py [--repeat N] [--only NAME ...] [--compare DIR] [--json]``.

Each round runs every command once as a fresh child, in an order that rotates from round
to round (so a burst of load on a shared machine falls on each command in turn), after
one untimed warm-up run of each. A command's wall time is taken around the child and
its CPU time (user+sys) from os.wait4. Reported per command: the median and quartiles
of its wall and CPU times, and the median and quartiles of its per-round ratio to the
reference, `python -c "import click, yaml"` (what any click+PyYAML CLI pays at least).
`rebase` runs once per stale recipe of bench/stale/ (real recipes written for older
sglang code, rebased onto the installed sglang 0.5.23: moved, re-anchored, declined) and
is reported per target: the round's summed time over the number of targets; `rebase
(one process)` rebases them all with one `prtoggle rebase PR [PR ...]`, per target too. The
`prtoggle` console script next to this interpreter is used, so what a user types is
what is timed (`python -m prtoggle` where there is none).

`--compare DIR` times a second copy of prtoggle in the same rounds (DIR first on the
children's PYTHONPATH, e.g. a `git archive` of the commit before a change), each of its
commands named `... (DIR's name)`: a before/after under the same load.

The children run without PYTHONDONTWRITEBYTECODE, so that the warm-up run leaves the
`.pyc` files an installed (or once-run) prtoggle has: with it set, every run compiled
prtoggle's modules from source again (40 to 70 ms a command here), which no user pays.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from machine_info import cpu_model, distribution_version

from prtoggle.protocol import REVERT_ENV

STALE = Path(__file__).resolve().parent / "stale"
"""The stale recipes `rebase` is timed on: collection `stale`, one target each."""
REFERENCE = "import click, yaml"
GOALS = {"--help": 1.8, "list": 3.6, "run -r 27460": 3.0, "run -r all": 4.7}
"""Issue 28's goals: the most each command may take, as a ratio to the reference."""
REBASE_GOAL_S = 0.15
"""Issue 28's goal for `rebase`: seconds per target."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME")
    parser.add_argument("--compare", type=Path, default=None, metavar="DIR")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prtoggle-startup-") as scratch:
        commands = _commands(Path(scratch))
        if args.only:
            commands = {name: commands[name] for name in ["reference", *args.only]}
        if args.compare is not None:
            commands |= _compared(commands, args.compare.resolve())
        load_before = os.getloadavg()
        for runs in commands.values():  # warm the file cache and the .pyc files
            _timed(runs)
        rounds = []
        for index in range(args.repeat):
            names = list(commands)
            names = names[index % len(names) :] + names[: index % len(names)]
            rounds.append({name: _per_target(name, _timed(commands[name])) for name in names})
            print(f"round {index + 1}/{args.repeat}", file=sys.stderr)
    report = _report(rounds, commands, load_before)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    _print_table(report)


_DROPPED = (REVERT_ENV, "PYTHONDONTWRITEBYTECODE")
"""Left out of the children's environment (see the module docstring)."""

Run = tuple[list[str], dict[str, str], tuple[int, ...]]
"""One child: its argv, its environment and the exit statuses that mean it did its work."""

ONE_PROCESS = "rebase (one process, per target)"
"""The name of the timing where one child rebases every stale recipe."""


def _commands(scratch: Path) -> dict[str, list[Run]]:
    """Each timed name and the children one timing of it runs."""
    env = {key: value for key, value in os.environ.items() if key not in _DROPPED}
    python = [sys.executable]
    script = Path(sys.executable).with_name("prtoggle")
    cli = [str(script)] if script.is_file() else [sys.executable, "-m", "prtoggle"]
    stale = {**env, "PRTOGGLE_YAML_PATH": str(STALE)}
    prs = [path.stem for path in sorted(STALE.glob("*.yaml"))]
    options = ["--collection", "stale", "--out", str(scratch)]
    rebase = [([*cli, "rebase", pr, *options], stale, (0, 1)) for pr in prs]
    return {
        "reference": [([*python, "-c", REFERENCE], env, (0,))],
        "python -c pass": [([*python, "-c", "pass"], env, (0,))],
        "--help": [([*cli, "--help"], env, (0,))],
        "list": [([*cli, "list"], env, (0,))],
        "run -r 27460": [([*cli, "run", "-r", "27460", "--", *python, "-c", "pass"], env, (0,))],
        "run -r all": [([*cli, "run", "-r", "all", "--", *python, "-c", "pass"], env, (0,))],
        "rebase (per target)": rebase,
        ONE_PROCESS: [([*cli, "rebase", *prs, *options], stale, (0, 1))],
    }


def _compared(commands: dict[str, list[Run]], copy: Path) -> dict[str, list[Run]]:
    """The prtoggle commands of `commands` again, run with `copy` first on PYTHONPATH."""
    compared = {}
    for name, runs in commands.items():
        if name in ("reference", "python -c pass"):
            continue
        copied = [
            (argv, {**env, "PYTHONPATH": os.pathsep.join([str(copy), *_path(env)])}, statuses)
            for argv, env, statuses in runs
        ]
        if name == ONE_PROCESS and not _rebases_several(copied[0]):
            print(f"{copy}: its rebase takes one PR; {name} not timed for it", file=sys.stderr)
            continue
        compared[f"{name} ({copy.name})"] = copied
    return compared


def _rebases_several(run: Run) -> bool:
    """Whether the prtoggle of `run` takes several PRs in one `rebase` (its usage line)."""
    argv, env, _ = run
    command = argv[: argv.index("rebase") + 1]
    usage = subprocess.run(
        [*command, "--help"], check=False, env=env, capture_output=True, text=True
    )
    return "PR..." in usage.stdout


def _path(env: dict[str, str]) -> list[str]:
    return [part for part in env.get("PYTHONPATH", "").split(os.pathsep) if part]


def _timed(runs: Sequence[Run]) -> tuple[float, float]:
    """Wall and CPU seconds of the children `runs`, one after another, per child."""
    wall = cpu = 0.0
    for argv, env, statuses in runs:
        start = time.perf_counter()
        with tempfile.TemporaryFile() as errors:
            process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=errors)
            _, status, usage = os.wait4(process.pid, 0)
            wall += time.perf_counter() - start
            cpu += usage.ru_utime + usage.ru_stime
            process.returncode = os.waitstatus_to_exitcode(status)
            if process.returncode not in statuses:  # rebase says 1 when it declines
                errors.seek(0)
                said = errors.read().decode(errors="replace")
                sys.exit(f"`{' '.join(argv)}` failed ({process.returncode}):\n{said}")
    return wall / len(runs), cpu / len(runs)


def _per_target(name: str, times: tuple[float, float]) -> tuple[float, float]:
    """A one-process rebase's times over its number of targets; other times as they are."""
    if not name.startswith(ONE_PROCESS):
        return times
    targets = len(list(STALE.glob("*.yaml")))
    return times[0] / targets, times[1] / targets


def _report(
    rounds: list[dict[str, tuple[float, float]]],
    commands: dict[str, list[Run]],
    load_before: tuple[float, float, float],
) -> dict[str, object]:
    figures: dict[str, object] = {}
    for name in commands:
        walls = [r[name][0] for r in rounds]
        cpus = [r[name][1] for r in rounds]
        ratios = [r[name][0] / r["reference"][0] for r in rounds]
        figures[name] = {
            "wall s": _spread(walls),
            "cpu s": _spread(cpus),
            "ratio to reference": _spread(ratios),
            "goal": _goal(name),
        }
    return {
        "machine": f"{cpu_model()} ({platform.machine()}), {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}",
        "load average (before, after)": f"{load_before[0]:.2f}, {os.getloadavg()[0]:.2f}",
        "date (UTC)": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "sglang": distribution_version("sglang"),
        "bytecode": "written by the warm-up run"
        + (" (PYTHONDONTWRITEBYTECODE dropped)" if "PYTHONDONTWRITEBYTECODE" in os.environ else ""),
        "rounds": len(rounds),
        "rebase targets": len(commands.get("rebase (per target)", [])),
        "commands": figures,
    }


def _spread(values: list[float]) -> list[float]:
    """[first quartile, median, third quartile], rounded."""
    if len(values) < 2:
        return [round(values[0], 4)] * 3
    return [round(value, 4) for value in statistics.quantiles(values, n=4)]


def _goal(name: str) -> str:
    name = name.split(" (", 1)[0]
    if name in GOALS:
        return f"<= {GOALS[name]}x"
    if name.startswith("rebase"):
        return f"<= {REBASE_GOAL_S} s"
    return ""


def _print_table(report: dict[str, object]) -> None:
    for key, value in report.items():
        if key != "commands":
            print(f"{key:30s} {value}")
    print(f"\n{'command':36s} {'wall s (q1 med q3)':24s} {'cpu s (med)':12s} ratio (q1 med q3)")
    commands = report["commands"]
    assert isinstance(commands, dict)
    for name, figure in commands.items():
        wall, cpu, ratio = figure["wall s"], figure["cpu s"], figure["ratio to reference"]
        shown = " ".join(f"{v:.3f}" for v in wall)
        ratios = " ".join(f"{v:.2f}" for v in ratio)
        print(f"{name:36s} {shown:24s} {cpu[1]:<12.3f} {ratios}  {figure['goal']}")


if __name__ == "__main__":
    main()

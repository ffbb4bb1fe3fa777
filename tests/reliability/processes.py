"""Real `prtoggle` processes for the reliability suite: a sleeping project, signals, /proc."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FIX_PR = 91001
IN_FORCE_LINE = re.compile(
    r"^prtoggle run: PRs? [\d, ]+ (in force|requested) in \d+ process(es)?\b.*\n", re.MULTILINE
)
"""The line `prtoggle run` says last when the reverts landed: where they were in force."""

SLEEPER = """\
import os, subprocess, sys, time
from pathlib import Path

# A child that starts a grandchild in its own process group, records both pids, sleeps.
if os.environ.get("SLEEPER_IGNORES_SIGTERM"):
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
pids_dir = Path(os.environ["PIDS_DIR"])
temporary = pids_dir / f".{os.getpid()}"
temporary.write_text(f"{os.getpid()} {grandchild.pid}")
temporary.rename(pids_dir / f"{os.getpid()}.pids")
time.sleep(120)
"""

TARGET = """\
def answer():
    value = 42
    return value
"""

FIX_YAML = """\
pr: {pr}
title: sleeping fix {pr}
merged: 2026-01-0{day}
expect: "Never"
repro: reliability_sleeper
bench: reliability_sleeper
patches:
  - target: reliability_target.answer
    edits:
      - match: "value = 42"
        replacement: "value = 41"
"""


@dataclass(frozen=True)
class SleepingProject:
    """A registry of fixes whose scenario and benchmark start a grandchild and sleep."""

    root: Path
    pids_dir: Path
    prs: tuple[int, ...]

    def env(self, **extra: str) -> dict[str, str]:
        python_path = os.pathsep.join([str(self.root / "src"), str(REPO_ROOT)])
        return {
            **os.environ,
            "PYTHONPATH": python_path,
            "PRTOGGLE_YAML_PATH": str(self.root / "registry"),
            "PIDS_DIR": str(self.pids_dir),
            **extra,
        }

    def recorded_pids(self) -> list[int]:
        """Every child and grandchild pid the sleepers wrote so far."""
        return [int(p) for path in self.pids_dir.glob("*.pids") for p in path.read_text().split()]

    def started_children(self) -> int:
        return len(list(self.pids_dir.glob("*.pids")))


def write_sleeping_project(tmp_path: Path) -> SleepingProject:
    source, registry, pids = tmp_path / "src", tmp_path / "registry", tmp_path / "pids"
    for directory in (source, registry, pids):
        directory.mkdir()
    (source / "reliability_sleeper.py").write_text(SLEEPER)
    (source / "reliability_target.py").write_text(TARGET)
    prs = (FIX_PR, FIX_PR + 1, FIX_PR + 2)
    for day, pr in enumerate(prs, start=1):
        (registry / f"{pr}.yaml").write_text(FIX_YAML.format(pr=pr, day=day))
    return SleepingProject(root=tmp_path, pids_dir=pids, prs=prs)


def start_prtoggle(args: list[str], *, env: dict[str, str]) -> subprocess.Popen[str]:
    """`python -m prtoggle ARGS` in a session of its own, with the signal dispositions a
    command typed at a terminal gets (as a shell job would be).

    A suite started in the background (`nohup pytest &`, a non-interactive shell's `&`)
    ignores SIGINT and SIGHUP, and prtoggle keeps a signal ignored on entry ignored, by
    design; the tests here are about a terminal's Ctrl-C and hang-up, so they reset them.
    """
    return subprocess.Popen(
        [sys.executable, "-c", _EXEC_WITH_TERMINAL_SIGNALS, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


_EXEC_WITH_TERMINAL_SIGNALS = """\
import os, signal, sys
for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(number, signal.SIG_DFL)
os.execv(sys.executable, [sys.executable, "-m", "prtoggle", *sys.argv[1:]])
"""
"""Reset the dispositions, then exec prtoggle in the same process (the pid the test holds)."""


def wait_for(condition: object, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def interrupt(process: subprocess.Popen[str], signum: int) -> tuple[float, str, str]:
    """Send `signum` to prtoggle; the seconds until it exited, and its stdout and stderr."""
    sent = time.monotonic()
    process.send_signal(signum)
    try:
        stdout, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    return time.monotonic() - sent, stdout, stderr


def is_running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting for its parent counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def descendants(pid: int) -> set[int]:
    """Every live process whose chain of parents leads to `pid`."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def below_children(pid: int) -> set[int]:
    """The live descendants of `pid` that are not its own children (a worker's forked runs)."""
    return descendants(pid) - {child for child in descendants(pid) if _parent_of(child) == pid}


def survivors(pids: set[int] | list[int]) -> list[int]:
    """The pids still running a moment after their owner exited (reparented ones too)."""
    time.sleep(0.2)
    return sorted(pid for pid in pids if is_running(pid))


@pytest.fixture
def sleeping_project(tmp_path: Path) -> Iterator[SleepingProject]:
    """The project; sleepers a failing test left behind are killed afterwards."""
    project = write_sleeping_project(tmp_path)
    yield project
    for pid in project.recorded_pids():
        if is_running(pid):
            os.kill(pid, signal.SIGKILL)


def python_code(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def _parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def without_in_force_lines(stderr: str) -> str:
    """`stderr` less `prtoggle run`'s in-force summary (IN_FORCE_LINE)."""
    return IN_FORCE_LINE.sub("", stderr)

"""Every command that runs children owns them: SIGHUP/SIGINT/SIGTERM end them all, exit fast.

Real `prtoggle` processes, real signals; the children record their pids (and those of the
grandchildren they start) in files, and the tests check that none of them survives.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import sys
import termios
import time

import pytest
from processes import (
    REPO_ROOT,
    SleepingProject,
    below_children,
    descendants,
    interrupt,
    is_running,
    start_prtoggle,
    survivors,
    wait_for,
    without_in_force_lines,
)

STATUS = {signal.SIGHUP: 129, signal.SIGINT: 130, signal.SIGTERM: 143}
LIMIT_S = 2.0  # the exit must come within this many seconds of the signal


def started(project: SleepingProject, count: int, process: subprocess.Popen[str]) -> None:
    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"prtoggle exited {process.returncode}: {process.communicate()}")
        return project.started_children() >= count

    wait_for(ready, timeout=60, what=f"{count} sleeping children to record their pids")


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT, signal.SIGTERM])
def test_run_ends_its_command_and_grandchildren_and_exits_128_plus_n_within_2_s(
    sleeping_project: SleepingProject, signum: signal.Signals
) -> None:
    pr = sleeping_project.prs[0]
    command = [sys.executable, "-m", "reliability_sleeper"]
    process = start_prtoggle(["run", "-r", str(pr), "--", *command], env=sleeping_project.env())
    started(sleeping_project, 1, process)
    owned = descendants(process.pid)
    seconds, stdout, stderr = interrupt(process, signum)
    stderr = without_in_force_lines(stderr)
    assert (process.returncode, stdout, stderr) == (
        STATUS[signum],
        "",
        f"interrupted by {signum.name}\n",
    )
    assert seconds < LIMIT_S
    assert len(owned) >= 2  # the command and its grandchild
    assert survivors(owned | set(sleeping_project.recorded_pids())) == []


def test_run_kills_a_command_that_ignores_sigterm_after_the_grace(
    sleeping_project: SleepingProject,
) -> None:
    command = [sys.executable, "-m", "reliability_sleeper"]
    env = sleeping_project.env(SLEEPER_IGNORES_SIGTERM="1")
    process = start_prtoggle(["run", "-r", str(sleeping_project.prs[0]), "--", *command], env=env)
    started(sleeping_project, 1, process)
    seconds, _stdout, stderr = interrupt(process, signal.SIGTERM)
    stderr = without_in_force_lines(stderr)
    assert (process.returncode, stderr) == (143, "interrupted by SIGTERM\n")
    assert 0.9 < seconds < LIMIT_S  # TERM was ignored: KILL came after the 1 s grace
    assert survivors(sleeping_project.recorded_pids()) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_repro_ends_running_scenarios_and_never_starts_queued_ones(
    sleeping_project: SleepingProject, signum: signal.Signals
) -> None:
    # Three fixes: six scenario runs, two at a time; four are still queued.
    args = ["repro", *map(str, sleeping_project.prs), "--jobs", "2"]
    process = start_prtoggle(args, env=sleeping_project.env())
    started(sleeping_project, 2, process)
    owned = descendants(process.pid)
    seconds, stdout, stderr = interrupt(process, signum)
    stderr = without_in_force_lines(stderr)
    assert (process.returncode, stdout, stderr) == (
        STATUS[signum],
        "",
        f"interrupted by {signum.name}\n",
    )
    assert seconds < LIMIT_S
    assert survivors(owned | set(sleeping_project.recorded_pids())) == []
    time.sleep(1.0)
    assert sleeping_project.started_children() == 2


GUARDED_YAML = """\
pr: {pr}
title: sleeping fix with a guard
patches:
  - target: reliability_target.answer
    edits:
      - match: "value = 42"
        replacement: "value = 41"
guards: [test_sleeping.py]
"""


def test_repro_of_guards_ends_its_pytest_children_on_ctrl_c(
    sleeping_project: SleepingProject,
) -> None:
    pr = sleeping_project.prs[-1] + 10
    registry = sleeping_project.root / "registry"
    (registry / f"{pr}.yaml").write_text(GUARDED_YAML.format(pr=pr))
    (sleeping_project.root / "test_sleeping.py").write_text(
        "def test_sleeps():\n    import reliability_sleeper  # noqa: F401\n"
    )
    args = ["repro", str(pr), "--tests", str(sleeping_project.root), "--jobs", "2"]
    process = start_prtoggle(args, env=sleeping_project.env())
    started(sleeping_project, 2, process)  # fixed and reverted: each pytest's test sleeps
    owned = descendants(process.pid)
    seconds, stdout, stderr = interrupt(process, signal.SIGINT)
    assert (process.returncode, stdout, without_in_force_lines(stderr)) == (
        130,
        "",
        "interrupted by SIGINT\n",
    )
    assert seconds < LIMIT_S
    assert survivors(owned | set(sleeping_project.recorded_pids())) == []


def test_more_ctrl_c_while_children_are_ending_print_no_traceback(
    sleeping_project: SleepingProject,
) -> None:
    env = sleeping_project.env(SLEEPER_IGNORES_SIGTERM="1")  # the grace then lasts 1 s
    args = ["repro", *map(str, sleeping_project.prs), "--jobs", "2"]
    process = start_prtoggle(args, env=env)
    started(sleeping_project, 2, process)
    sent = time.monotonic()
    while process.poll() is None:  # Ctrl-C again and again until prtoggle is gone
        process.send_signal(signal.SIGINT)
        time.sleep(0.02)
    stdout, stderr = process.communicate(timeout=30)
    assert (process.returncode, stdout, stderr) == (130, "", "interrupted by SIGINT\n")
    assert time.monotonic() - sent < LIMIT_S
    assert survivors(sleeping_project.recorded_pids()) == []


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT])
def test_bisect_ends_the_running_command_on_a_hang_up_or_ctrl_c(
    sleeping_project: SleepingProject, signum: signal.Signals
) -> None:
    command = [sys.executable, "-m", "reliability_sleeper"]
    args = ["bisect", "-r", str(sleeping_project.prs[0]), "--", *command]
    process = start_prtoggle(args, env=sleeping_project.env())
    started(sleeping_project, 1, process)
    seconds, stdout, stderr = interrupt(process, signum)
    assert (process.returncode, stdout, stderr) == (
        STATUS[signum],
        "",
        f"interrupted by {signum.name}\n",
    )
    assert seconds < LIMIT_S
    assert survivors(sleeping_project.recorded_pids()) == []


def test_bench_ends_the_running_benchmark_on_sigterm(sleeping_project: SleepingProject) -> None:
    args = ["bench", *map(str, sleeping_project.prs)]
    process = start_prtoggle(args, env=sleeping_project.env())
    started(sleeping_project, 1, process)
    seconds, stdout, stderr = interrupt(process, signal.SIGTERM)
    assert (process.returncode, stdout, stderr) == (143, "", "interrupted by SIGTERM\n")
    assert seconds < LIMIT_S
    assert survivors(sleeping_project.recorded_pids()) == []
    time.sleep(0.5)
    assert sleeping_project.started_children() == 1  # the next fixes' benchmarks never ran


@pytest.mark.slow
def test_repro_all_of_the_shipped_fixes_interrupted_while_a_scenario_runs_leaves_nothing(
    sleeping_project: SleepingProject,
) -> None:
    env = {**sleeping_project.env(), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PRTOGGLE_YAML_PATH")
    process = start_prtoggle(["repro", "--all", "--jobs", "2"], env=env)
    # A scenario run is a process the warm worker forked: a grandchild of prtoggle.
    wait_for(lambda: below_children(process.pid), timeout=60.0, what="a forked scenario run")
    owned = descendants(process.pid)
    seconds, _stdout, stderr = interrupt(process, signal.SIGINT)
    assert process.returncode == 130
    assert stderr.splitlines()[-1] == "interrupted by SIGINT"
    assert "Traceback" not in stderr
    assert seconds < LIMIT_S
    assert [pid for pid in owned if is_running(pid)] == []


def test_run_gives_its_command_the_terminal_for_input_and_ctrl_c(
    sleeping_project: SleepingProject,
) -> None:
    # prtoggle runs on a pseudo-terminal, in the foreground as a shell job would be.
    master, slave = os.openpty()

    def on_the_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    code = "import sys, time; print('got', input(), flush=True); time.sleep(120)"
    args = ["run", "-r", str(sleeping_project.prs[0]), "--", sys.executable, "-c", code]
    process = subprocess.Popen(
        [sys.executable, "-m", "prtoggle", *args],
        env=sleeping_project.env(),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        preexec_fn=on_the_terminal,  # noqa: PLW1509 (single-threaded test)
    )
    os.close(slave)
    try:
        os.write(master, b"hello\n")
        assert "got hello" in read_until(master, "got hello", timeout=60)
        sent = time.monotonic()
        os.write(master, b"\x03")  # Ctrl-C typed on the terminal reaches the command
        assert process.wait(timeout=10) == 130  # the command died of SIGINT: 128 + 2
        assert time.monotonic() - sent < LIMIT_S
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)


def read_until(descriptor: int, text: str, *, timeout: float) -> str:
    """What the terminal shows until `text` appears (or the time runs out)."""
    seen = ""
    deadline = time.monotonic() + timeout
    while text not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([descriptor], [], [], 0.1)
        if ready:
            try:
                seen += os.read(descriptor, 4096).decode(errors="replace")
            except OSError:  # the terminal closed: every process on it is gone
                break
    return seen

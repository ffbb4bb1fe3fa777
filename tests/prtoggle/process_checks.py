"""Process checks the tests share: whether a pid runs, and a signal that must end a command
line, its runs and its warm worker at once."""

from __future__ import annotations

import os
import subprocess
import time


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie of ours is reaped and counts as gone)."""
    try:
        finished, _status = os.waitpid(pid, os.WNOHANG)
        if finished:
            return False
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def parent_of(pid: int) -> int:
    """The parent pid of `pid` (from /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def assert_signal_ends_all(process: subprocess.Popen[str], signum: int, pids: list[int]) -> None:
    """`signum` to `process` ends it within 3 s with 128 + signum, and every pid of `pids`
    (its runs, its warm server) within 3 s more."""
    sent = time.monotonic()
    process.send_signal(signum)
    assert process.wait(timeout=10) == 128 + signum
    assert time.monotonic() - sent < 3
    deadline = time.monotonic() + 3
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in pids if alive(pid)] == []

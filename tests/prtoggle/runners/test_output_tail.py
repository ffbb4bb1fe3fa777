"""Tests for runners.output_tail: a run ends at its command's exit, with a bounded tail."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from prtoggle.runners.output_tail import OutputTail, run_to_exit


def test_a_background_process_holding_stdout_is_not_waited_for_and_is_ended() -> None:
    started = time.monotonic()
    run = run_to_exit(["sh", "-c", "echo begun; sleep 40 & echo $! > /dev/stderr; exit 3"])
    assert time.monotonic() - started < 5
    assert (run.returncode, run.stdout) == (3, "begun\n")
    assert not _is_running(int(run.stderr))  # ended with the run, not left to run 40 s


def test_only_the_last_bytes_of_each_stream_are_kept_and_the_rest_is_counted() -> None:
    code = (
        "import sys; sys.stdout.write('x' * 300000 + '\\nlast line\\n'); "
        "sys.stderr.write('Traceback\\nValueError: end\\n'); sys.exit(1)"
    )
    run = run_to_exit([sys.executable, "-c", code], limit=1000)
    assert run.returncode == 1
    assert run.stdout.splitlines()[0] == (
        "[prtoggle: the first 299011 bytes of this output were not kept]"
    )
    assert run.stdout.endswith("x\nlast line\n")
    assert len(run.stdout.splitlines()[1]) == 1000 - len("\nlast line\n")
    assert run.stderr == "Traceback\nValueError: end\n"


def test_a_run_past_its_timeout_has_no_status_and_its_group_is_ended() -> None:
    started = time.monotonic()
    run = run_to_exit(["sh", "-c", "echo waiting; sleep 30"], timeout=0.5)
    assert time.monotonic() - started < 3
    assert (run.returncode, run.stdout, run.timed_out) == (None, "waiting\n", True)


def test_the_tail_trims_in_batches_and_keeps_exactly_its_limit() -> None:
    tail = OutputTail(limit=4)
    for chunk in (b"abc", b"defgh", b"ij"):
        tail.add(chunk)
    assert tail.text() == "[prtoggle: the first 6 bytes of this output were not kept]\nghij"
    assert len(tail.data) <= 8


def _is_running(pid: int) -> bool:
    """Alive and not a zombie (an ended orphan may wait for its reaper a while)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")

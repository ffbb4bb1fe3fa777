"""A command run to its own exit with a bounded tail of its output (bisect's runs).

`run_child` waits until the child's pipes close and keeps all it printed: a command that
leaves a background process holding its stdout (`sh -c 'sleep 40 & exit 0'`) blocks it
that long, and 150 MB of output are 150 MB (and more) of memory. Here a run is over when
the command's own process exits: what is already in the pipes is read, then what it left
behind in its process group is ended (SIGTERM, SIGKILL after GRACE_SECONDS). Only the
last `limit` bytes of each stream are kept, behind a line that says how much was dropped.
"""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prtoggle.errors import RunnerError
from prtoggle.runners.child_process import (
    GRACE_SECONDS,
    CommandRun,
    disown,
    end_groups,
    raise_if_interrupted,
    start_child,
)

TAIL_BYTES = 1 << 20
"""Bytes of each stream a bounded run keeps: enough for a traceback, a metric, a summary."""
_AFTER_EXIT_SECONDS = 0.2
"""How long output still arriving after the command's exit is read (what it had written)."""


@dataclass
class OutputTail:
    """The last `limit` bytes written to one stream, and how many came before them."""

    limit: int = TAIL_BYTES
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * self.limit:  # trimmed in batches: amortised O(1) per byte
            excess = len(self.data) - self.limit
            del self.data[:excess]
            self.dropped += excess

    def text(self) -> str:
        excess = max(0, len(self.data) - self.limit)
        dropped = self.dropped + excess
        body = bytes(self.data[excess:]).decode(errors="replace")
        if not dropped:
            return body
        return f"[prtoggle: the first {dropped} bytes of this output were not kept]\n{body}"


def run_to_exit(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    cwd: str | None = None,
    limit: int = TAIL_BYTES,
) -> CommandRun:
    """Run `argv` in its own session until its process exits (or `timeout`: returncode None);
    its output is the bounded tail of each stream. `run_child`'s signature otherwise."""
    started = time.monotonic()
    process = start_child(argv, env=env, cwd=cwd, capture=True)
    stdout, stderr = process.stdout, process.stderr
    if stdout is None or stderr is None:  # never with capture=True
        raise RunnerError(f"cannot read the output of {argv[0]!r}: no pipes")
    out, err = OutputTail(limit), OutputTail(limit)
    deadline = None if timeout is None else started + timeout
    try:
        pidfd = os.pidfd_open(process.pid)
        try:
            streams = {stdout.fileno(): out, stderr.fileno(): err}
            exited = read_until(streams, exit_fd=pidfd, deadline=deadline)
        finally:
            os.close(pidfd)
        returncode = process.wait() if exited else None
    finally:
        end_groups([process.pid], grace=GRACE_SECONDS)  # what it left behind, or all of it
        process.wait()
        disown(process.pid)
        stdout.close()
        stderr.close()
    raise_if_interrupted()
    return CommandRun(
        argv=tuple(argv),
        returncode=returncode,
        seconds=time.monotonic() - started,
        stdout=out.text(),
        stderr=err.text(),
        timeout=timeout,
    )


def read_until(streams: Mapping[int, OutputTail], *, exit_fd: int, deadline: float | None) -> bool:
    """Read `streams` into their tails until `exit_fd` is readable (the process exited), then
    what arrives within _AFTER_EXIT_SECONDS or until they close. False: `deadline` passed."""
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        selector.register(exit_fd, selectors.EVENT_READ)
        exited_at: float | None = None
        while True:
            now = time.monotonic()
            if exited_at is None:
                wait = None if deadline is None else deadline - now
                if wait is not None and wait <= 0:
                    return False
            else:
                wait = exited_at + _AFTER_EXIT_SECONDS - now
                if wait <= 0 or not selector.get_map():
                    return True
            for key, _mask in selector.select(wait):
                if key.fd == exit_fd:
                    exited_at = time.monotonic()
                    selector.unregister(exit_fd)
                    continue
                chunk = os.read(key.fd, 65536)
                if chunk:
                    streams[key.fd].add(chunk)
                else:
                    selector.unregister(key.fd)

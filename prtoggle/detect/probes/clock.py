"""Current phase and step, kept on the host and mirrored into each device's `when` scalar.

Probes never bake the phase or step into their launch: they read the device scalar when
they run, so a probe captured into a CUDA graph records the phase and step of each replay.
The host writes the scalar with a non-blocking `fill_` on the current stream, so a caller
advances the step between replays with:

    detect.set_step(n)        # outside the graph, on the stream that replays it
    with detect.phase("replay"):
        graph.replay()

A phase()/set_step() call made while a stream is capturing changes the host state only (a
fill inside the capture would be replayed with a stale value); the device scalar catches up
at the next phase()/set_step()/probe/check() outside capture.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from numbers import Integral

from prtoggle.detect.probes import witness
from prtoggle.errors import DetectUsageError

PHASES = ("eager", "capture-warmup", "capture", "replay")
MAX_STEP = 2**31 - 1
_STEP_BITS = 32


@dataclass
class Clock:
    """The host's phase stack and step counter."""

    phases: list[str] = field(default_factory=lambda: ["eager"])
    step: int = 0


def reset_clock() -> None:
    """Back to phase "eager", step 0: the clock of a fresh process."""
    vars(_CLOCK).update(vars(Clock()))  # in place: holders of it see the reset


_CLOCK = Clock()


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Run the body in phase `name` (one of PHASES); the previous phase comes back on exit."""
    if name not in PHASES:
        raise DetectUsageError(
            f"unknown detection phase {name!r}: expected one of {', '.join(PHASES)}"
        )
    _CLOCK.phases.append(name)
    _publish()
    try:
        yield
    finally:
        _CLOCK.phases.pop()
        _publish()


def set_step(step: int) -> None:
    """Set the step recorded by later first hits (0 <= step <= 2**31 - 1)."""
    if isinstance(step, bool) or not isinstance(step, Integral) or not 0 <= step <= MAX_STEP:
        raise DetectUsageError(f"set_step(): step must be an int in [0, {MAX_STEP}], got {step!r}")
    _CLOCK.step = int(step)
    _publish()


def current_phase() -> str:
    """The innermost active phase ("eager" outside any phase() block)."""
    return _CLOCK.phases[-1]


def current_step() -> int:
    """The step set by the last set_step() (0 at start)."""
    return _CLOCK.step


def current_when() -> int:
    """The packed (phase, step) value probes stamp on a first hit."""
    return pack_when(current_phase(), _CLOCK.step)


def pack_when(phase_name: str, step: int) -> int:
    """Pack a phase and a step into one int64 (phase code in the high bits)."""
    return (PHASES.index(phase_name) << _STEP_BITS) | step


def unpack_when(when: int) -> tuple[str, int]:
    """The (phase, step) of a packed value; ("?", -1) for the unhit marker or junk."""
    code, step = when >> _STEP_BITS, when & ((1 << _STEP_BITS) - 1)
    if when < 0 or code >= len(PHASES):
        return "?", -1
    return PHASES[code], step


def sync_device_clock() -> None:
    """Write the host clock into the device scalars if a write was deferred by capture."""
    registry = witness.witness_tables()
    if registry.stamp_pending:
        registry.stamp(current_when())


def _publish() -> None:
    """Mirror the host clock into every device table's `when` scalar."""
    witness.witness_tables().stamp(current_when())

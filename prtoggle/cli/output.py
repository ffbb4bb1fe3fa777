"""Human output of the CLI: control characters escaped, tables fit to a width, closed outputs."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from prtoggle.errors import PrToggleError

TABLE_WIDTH = 100
"""Tables fit this many columns unless `--wide` (cut cells end with an ellipsis)."""
EXIT_BROKEN_PIPE = 141
"""The reader of standard output went away (`prtoggle list | head -1`): 128 + SIGPIPE,
the status a shell reports for a command the pipe's signal ended."""

Cut = Literal["end", "start"]
"""Where a cell too wide for its column loses text: its end, or its start (dotted names)."""

_CONTROLS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline, DEL, C1 (CSI, OSC, ...)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional overrides and marks
    "\u2028\u2029"  # line and paragraph separators
)
_UNSAFE_IN_LINES = re.compile(f"[{_CONTROLS}]")
_UNSAFE_IN_A_LINE = re.compile(f"[{_CONTROLS}\t\n]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_OUTPUT_ERRNOS = (errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG)


class OutputUnwritable(PrToggleError):
    """Standard output or error cannot be written (a closed pipe, a full disk)."""

    def __init__(self, stream: str, cause: OSError) -> None:
        super().__init__(f"cannot write to {stream}: {cause.strerror or cause}")
        self.stream = stream
        self.broken_pipe = cause.errno == errno.EPIPE


def terminal_safe(text: str, *, lines: bool = False) -> str:
    """`text` with every character a terminal would act on written as an escape.

    Escaped: C0 and C1 controls (ESC, CSI, OSC, `\\r`, bell, ...), DEL, Unicode
    bidirectional overrides and line separators: `\\x1b`, `\\r`, `\\u202e`. `lines`:
    line breaks and tabs are kept (multi-line text such as a diff); else they are escaped
    too, so one value stays on its one line.
    """
    pattern = _UNSAFE_IN_LINES if lines else _UNSAFE_IN_A_LINE
    return pattern.sub(_escape, text)


def plural(count: int, noun: str) -> str:
    """`1 test`, `2 tests`, `2 fixes`: how human output counts."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {noun}{'es' if noun.endswith(('s', 'x', 'ch', 'sh')) else 's'}"


def fit_widths(
    widths: Sequence[int], minimums: Sequence[int], *, width: int, cuttable: Mapping[int, Cut]
) -> list[int]:
    """Column widths narrowed, widest cuttable column first, until a line of them (two
    spaces apart) fits `width` or each cuttable one is down to its minimum."""
    widths = list(widths)
    excess = sum(widths) + 2 * (len(widths) - 1) - width
    while excess > 0:
        room = [i for i in cuttable if widths[i] > max(minimums[i], 2)]
        if not room:
            break
        widest = max(room, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths


def cut_cell(cell: str, size: int, where: Cut | None) -> str:
    """`cell` in at most `size` characters, cut at `where` with an ellipsis (None: whole)."""
    if where is None or len(cell) <= size:
        return cell
    mark = _ellipsis()
    keep = max(size - len(mark), 0)
    return cell[:keep] + mark if where == "end" else mark + cell[len(cell) - keep :]


@contextlib.contextmanager
def terminal_safe_output() -> Iterator[None]:
    """sys.stdout and sys.stderr escape control characters (line breaks kept) while in the
    block, and turn a failed write into OutputUnwritable; put back after."""
    saved = sys.stdout, sys.stderr
    sys.stdout = _SafeStream(saved[0], "standard output")
    sys.stderr = _SafeStream(saved[1], "standard error")
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def discard_standard_output() -> None:
    """Point file descriptor 1 at /dev/null: what is still buffered for a reader that went
    away (or a full disk) is dropped at exit, without a second error."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
        os.close(devnull)


class _SafeStream:
    """A text stream that escapes control characters before writing (see terminal_safe).

    It hides the binary `buffer` of the stream it wraps, so nothing bypasses it.
    """

    def __init__(self, stream: Any, name: str) -> None:
        self._stream = stream
        self._name = name

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(terminal_safe(text, lines=True)))
        except OSError as exc:
            raise _unwritable(self._name, exc) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _unwritable(self._name, exc) from exc

    def __getattr__(self, name: str) -> Any:
        if name == "buffer":
            raise AttributeError(name)
        return getattr(self._stream, name)


def _unwritable(name: str, exc: OSError) -> Exception:
    return OutputUnwritable(name, exc) if exc.errno in _OUTPUT_ERRNOS else exc


def _escape(found: re.Match[str]) -> str:
    char = found.group(0)
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _ellipsis() -> str:
    """`…`, or `...` where standard output cannot encode it."""
    try:
        "…".encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return "..."
    return "…"

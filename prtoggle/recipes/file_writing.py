"""Write a recipe file safely: never through a link or into a special file, and atomically."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def unsafe_destination(path: Path) -> str | None:
    """Why `path` must not be written (a symbolic link, a FIFO, a directory...), else None.

    Nothing there yet, or a regular file, is safe. An `lstat` error other than "missing"
    raises the OSError for the caller to name.
    """
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError):  # nothing there yet (or its folder)
        return None
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(path)
        return f"is a symbolic link (to {target}); refused: prtoggle never writes through a link"
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(info.st_mode)), "special")
        return f"is {kind}, not a regular file; refused (a recipe is written as a regular file)"
    return None


def replace_atomically(path: Path, data: bytes) -> None:
    """`data` into a temporary file next to `path`, synced, then renamed over `path`.

    A reader sees the old file or the new one, never a part of either; an error or an
    interruption leaves the old file as it was (the temporary removed). The mode is the old
    file's, else what the umask gives a new file.
    """
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """The rename made durable too, where the file system allows a directory fsync."""
    try:
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _umask() -> int:
    """This process's umask: from /proc where Linux gives it, else set and put back."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # process-global for an instant: the CLI writes from one thread
    os.umask(mask)
    return mask

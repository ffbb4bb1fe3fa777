"""Read Python files from a source tree: a directory, a wheel or an sdist, in place."""

from __future__ import annotations

import errno
import os
import stat
import tarfile
import zipfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from prtoggle.errors import PatchApplicationError, TargetResolutionError
from prtoggle.patching.lines import decode_python_source

T = TypeVar("T")
WHEEL_SUFFIXES = (".whl", ".zip")
SDIST_SUFFIXES = (".tar.gz", ".tgz", ".tar")
MAX_MEMBER_BYTES = 16 * 1024 * 1024
"""An archive member larger than this (16 MiB, uncompressed) is refused unread; sglang's
largest source file is under 300 KB."""
MAX_ARCHIVE_BYTES = 256 * 1024 * 1024
"""At most this much (256 MiB, uncompressed) is read from one archive; all of sglang's
source files together are about 70 MB."""


class ArchiveTooLarge(PatchApplicationError):
    """An archive member past the read bounds: refused unread (a damaged archive, a bomb)."""


@dataclass(frozen=True)
class SourceFile:
    """One file of a tree: its text and the name it is shown under."""

    name: str
    text: str


@dataclass
class SourceTree:
    """The `.py` files of a directory or archive, looked up by module-relative path.

    In an archive a path `a/b.py` may sit under leading folders (`pkg-1.0/`, `python/`,
    `src/`); the shortest such member wins. Archives are read in place, never extracted.
    An archive's file is read once per tree; a directory's every time it is asked for.
    """

    path: Path
    _members: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _archive: zipfile.ZipFile | tarfile.TarFile | None = field(default=None, repr=False)
    _memo: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False, compare=False)
    _bytes_read: int = field(default=0, repr=False, compare=False)
    consulted: set[str] | None = field(default=None, repr=False, compare=False)
    """When a set: every path of a directory tree whose contents or presence an answer of
    this tree depended on (files read or looked for, the folder listed for metadata); None
    after a question it cannot account for (a package's file listing), or for an archive."""

    def __post_init__(self) -> None:
        if self._archive is None and self.consulted is None:
            self.consulted = set()

    @property
    def label(self) -> str:
        return str(self.path)

    def read(self, relative: str) -> SourceFile | None:
        """The file at module-relative posix path `relative`, or None when absent."""
        if self._archive is None:
            return self._read_uncached(relative)
        return self.memo("read", relative, lambda: self._read_uncached(relative))

    def memo(self, kind: str, key: str, make: Callable[[], T]) -> T:
        """`make()` once per (kind, key) for this tree: what is derived from its files."""
        slot = (kind, key)
        if slot not in self._memo:
            self._memo[slot] = make()
        return self._memo[slot]

    def _read_uncached(self, relative: str) -> SourceFile | None:
        if self._archive is None:
            name = self._joined(relative)
            self._consult(name)
            data = _read_regular_file(name)
            return None if data is None else SourceFile(name=name, text=_decode(data, name))
        member = self._member(relative)
        if member is None:
            return None
        return SourceFile(name=f"{self.path}!{member}", text=self._read_member(member))

    def has_package(self, top: str) -> bool:
        """Whether a top-level package or module named `top` is in the tree."""
        if self._archive is None:
            self._consult(str(self.path / top), str(self.path / f"{top}.py"))
            return (self.path / top).is_dir() or (self.path / f"{top}.py").is_file()
        names = self._members.get(f"{top}.py", []) + self._members.get("__init__.py", [])
        return any(_under(name, f"{top}.py") or f"/{top}/" in f"/{name}" for name in names)

    def metadata_files(
        self, *, dist_info: Callable[[str], bool] | None = None
    ) -> list[tuple[str, str]]:
        """(name, text) of the files that may give the tree's distribution and version.

        `*.dist-info/METADATA` and `PKG-INFO` at the top or one folder down (a wheel, an
        sdist), and a directory's own `pyproject.toml`. `dist_info`: in a directory, read
        only the `*.dist-info` folders whose name (without `.dist-info`) it accepts.
        """
        if self._archive is None:
            paths = [*self._dist_info_metadata(dist_info), self.path / "PKG-INFO"]
            paths.append(self.path / "pyproject.toml")
            self._consult(str(self.path), *(str(path) for path in paths))
            return [(str(p), _decode_text(p.read_bytes())) for p in paths if p.is_file()]
        if isinstance(self._archive, zipfile.ZipFile):
            names = self._archive.namelist()
        else:
            names = [member.name for member in self._archive.getmembers() if member.isfile()]
        wanted = [name for name in names if _is_metadata_member(name)]
        return [(name, _decode_text(self._read_bytes(name))) for name in wanted]

    def python_files(self, top: str) -> list[str]:
        """Module-relative paths (`top/x/y.py`) of the `.py` files of package `top`."""
        if self._archive is None:
            self.consulted = None  # a listing of a whole package: not accounted for
            return sorted(_python_files_below(self.path, top))
        found = set()
        for members in self._members.values():
            for member in members:
                index = f"/{member}".find(f"/{top}/")
                if index >= 0:
                    found.add(member[index:])
        return sorted(found)

    def _consult(self, *paths: str) -> None:
        if self.consulted is not None:
            self.consulted.update(paths)

    def _dist_info_metadata(self, accept: Callable[[str], bool] | None) -> list[Path]:
        """`*.dist-info/METADATA` of a directory, in `Path.glob`'s order (folders `accept`
        leaves out are not looked into)."""
        found = []
        try:
            with os.scandir(self.path) as entries:
                for entry in entries:
                    name = entry.name
                    if not name.endswith(".dist-info"):
                        continue
                    if accept is not None and not accept(name[: -len(".dist-info")]):
                        continue
                    if _is_dir(entry):
                        found.append(Path(entry.path, "METADATA"))
        except OSError:
            return []
        return found

    def _joined(self, relative: str) -> str:
        """`str(self.path.joinpath(*PurePosixPath(relative).parts))`, without pathlib for a
        plain relative path (every part a name): a package's thousands of files are read."""
        parts = relative.split("/")
        if not all(part and part != "." for part in parts):
            return str(self.path.joinpath(*PurePosixPath(relative).parts))
        base = str(self.path)
        if base == ".":
            return relative
        return f"{base}{relative}" if base.endswith("/") else f"{base}/{relative}"

    def looked_for(self, relative: str) -> str:
        if self._archive is None:
            return str(self.path.joinpath(*PurePosixPath(relative).parts))
        return f"{self.path}!*/{relative}"

    def _member(self, relative: str) -> str | None:
        candidates = self._members.get(PurePosixPath(relative).name, [])
        found = [member for member in candidates if _under(member, relative)]
        return min(found, key=len) if found else None

    def _read_member(self, member: str) -> str:
        return _decode(self._read_bytes(member), Path(f"{self.path}!{member}"))

    def _read_bytes(self, member: str) -> bytes:
        if isinstance(self._archive, zipfile.ZipFile):
            self._count(member, self._archive.getinfo(member).file_size)
            with self._archive.open(member) as handle:
                return handle.read(MAX_MEMBER_BYTES + 1)
        info = self._archive.getmember(member) if self._archive else None
        extracted = self._archive.extractfile(info) if self._archive and info else None
        if info is None or extracted is None:
            raise TargetResolutionError(f"{self.path}: {member} is not a regular file")
        self._count(member, info.size)
        return extracted.read(MAX_MEMBER_BYTES + 1)

    def _count(self, member: str, size: int) -> None:
        """Refuse `member` of `size` bytes past the bounds; else count it as read."""
        where = f"{self.path}!{member}"
        if size > MAX_MEMBER_BYTES:
            raise ArchiveTooLarge(
                f"{where}: {size} bytes uncompressed, over the limit of {MAX_MEMBER_BYTES} "
                "bytes for one file of an archive; refused unread (a source file is far "
                "smaller: a damaged archive or a zip bomb?)"
            )
        if self._bytes_read + size > MAX_ARCHIVE_BYTES:
            raise ArchiveTooLarge(
                f"{where}: reading it would take {self.path} past {MAX_ARCHIVE_BYTES} bytes "
                "read uncompressed; refused unread (a damaged archive or a zip bomb?)"
            )
        self._bytes_read += size


def open_source_tree(path: Path) -> SourceTree:
    """A directory, a wheel (`.whl`) or an sdist (`.tar.gz`), read in place."""
    if path.is_dir():
        return SourceTree(path=path)
    name = path.name.lower()
    try:
        if name.endswith(WHEEL_SUFFIXES):
            wheel = zipfile.ZipFile(path)
            archive: zipfile.ZipFile | tarfile.TarFile = wheel
            names = wheel.namelist()
        elif name.endswith(SDIST_SUFFIXES):
            sdist = tarfile.open(path, "r:*")  # noqa: SIM115 - kept open while checking
            archive = sdist
            names = [member.name for member in sdist.getmembers() if member.isfile()]
        else:
            raise TargetResolutionError(
                f"--source-root {path}: expected a directory, a wheel (.whl) or an sdist "
                "(.tar.gz, .tgz, .tar)"
            )
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise TargetResolutionError(
            f"--source-root {path}: cannot read the archive: {exc}"
        ) from exc
    members: dict[str, list[str]] = defaultdict(list)
    for member in names:
        if member.endswith(".py"):
            members[PurePosixPath(member).name].append(member)
    return SourceTree(path=path, _members=dict(members), _archive=archive)


def _python_files_below(root: Path, top: str) -> list[str]:
    """`p.relative_to(root).as_posix()` for `p` in `(root / top).rglob("*.py")`, one
    `os.scandir` per folder (pathlib's rglob scans each twice, through Path objects):
    every entry named `*.py`, in every folder below that is no symlink."""
    base = root / top
    if not base.is_dir():
        return []
    prefix = len(str(root)) + (0 if str(root).endswith("/") else 1)
    found: list[str] = []
    pending = [str(base)]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as scanned:
                entries = list(scanned)
        except PermissionError:
            continue
        for entry in entries:
            if entry.name.endswith(".py"):
                found.append(entry.path[prefix:] if str(root) != "." else entry.path)
            if _is_dir(entry) and not entry.is_symlink():
                pending.append(entry.path)
    return found


def _read_regular_file(name: str) -> bytes | None:
    """The bytes of `name` when `Path(name).is_file()` (a regular file, links followed),
    else None (missing, a loop, a folder, a FIFO or device: never opened). Through `os`
    calls alone: a package's thousands of files are read."""
    try:
        status = os.stat(name)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return None
        raise
    except ValueError:  # a name that cannot be encoded
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    descriptor = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
    try:
        chunks = [os.read(descriptor, status.st_size + 1)]
        while chunks[-1]:
            chunks.append(os.read(descriptor, 1 << 20))
    finally:
        os.close(descriptor)
    return b"".join(chunks)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _under(member: str, relative: str) -> bool:
    return member == relative or member.endswith(f"/{relative}")


def _decode(data: bytes, where: Path | str) -> str:
    """Decode as an import does (coding cookie, byte-order mark, universal newlines)."""
    try:
        return decode_python_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        raise TargetResolutionError(f"{where}: cannot decode the source file ({exc})") from exc


def _is_metadata_member(name: str) -> bool:
    parts = PurePosixPath(name).parts
    if parts[-1:] == ("METADATA",):
        return len(parts) == 2 and parts[0].endswith(".dist-info")
    return parts[-1:] == ("PKG-INFO",) and len(parts) <= 2


def _decode_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")

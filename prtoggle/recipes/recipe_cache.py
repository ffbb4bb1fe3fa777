"""Parsed recipes kept between commands: a user cache file, checked against each recipe file.

Every `prtoggle list`/`run`/`check` reads the recipe files; parsing them (PyYAML and the
schema) is most of what the registry costs. Parsed recipes are kept in one JSON file of
the user's cache folder (CACHE_ENV, else `$XDG_CACHE_HOME/prtoggle`, else
`~/.cache/prtoggle`), named after a checksum of prtoggle's version (its `__init__.py`) and of the
source of the code that parses recipes: another prtoggle, or a changed parser, uses another file.

An entry serves only the same file (path and collection) with the same identity (size,
mtime_ns, inode, ctime_ns) and the very text just read from it: a recipe edited in place,
even to the same size and mtime, is parsed again. A cache file that is missing, corrupt,
not this format, too large, not the user's own or writable by others is ignored (each
recipe is parsed) and replaced at the next write. Writes go to a temporary file renamed
over the cache (atomic; concurrent writers: the last rename wins, nothing is half
written); a write that fails (a read-only folder) is skipped, never an error.
Process-global: the cache document read (once per file) and the entries parsed since the
last write; reset() forgets both.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prtoggle.recipes import parsed_recipes
from prtoggle.recipes.schema import Recipe

__all__ = [
    "CACHE_ENV",
    "cache_file",
    "cached_entry",
    "file_identity",
    "flush",
    "keep_entry",
    "lookup",
    "reset",
    "store",
]

CACHE_ENV = "PRTOGGLE_CACHE_DIR"
"""The folder of prtoggle's cache files; `0` or `off` keeps no cache."""
FORMAT = 1
"""Bumped whenever what the cache file holds changes."""
MAX_CACHE_BYTES = 16 * 1024 * 1024
"""A cache file larger than this is not read (and is replaced at the next write)."""
_PACKAGE = Path(__file__).resolve().parents[1]
_SOURCES = {
    "recipes": (
        *sorted((_PACKAGE / "recipes").glob("*.py")),
        _PACKAGE / "patching" / "types.py",
        _PACKAGE / "patching" / "define_code.py",
    ),
    "checks": (
        *sorted((_PACKAGE / "recipes").glob("*.py")),
        *sorted((_PACKAGE / "patching").glob("*.py")),
    ),
}
"""Per kind of cache file, the code whose output it keeps (parsing; checking a recipe)."""

logger = logging.getLogger(__name__)

Identity = tuple[int, int, int, int]
"""(size, mtime_ns, inode, ctime_ns) of a recipe file."""


@dataclass
class _State:
    """The cache document read (by cache file), and the entries parsed since the last write."""

    documents: dict[str, dict[str, object]] = field(default_factory=dict)
    pending: dict[str, dict[str, object]] = field(default_factory=dict)
    """Per cache file, the entries kept since the last flush."""
    files: dict[str, Path | None] = field(default_factory=dict)
    files_for: tuple[str | None, str | None, str] | None = None
    """The settings `files` were chosen for: CACHE_ENV, XDG_CACHE_HOME, the home folder."""


_STATE = _State()


def cache_file(kind: str = "recipes") -> Path | None:
    """This prtoggle's cache file of `kind` (recipes, checks); None when CACHE_ENV turns the
    cache off (or there is no home folder)."""
    wanted = (os.environ.get(CACHE_ENV), os.environ.get("XDG_CACHE_HOME"), _home())
    if _STATE.files_for != wanted:
        _STATE.files_for, _STATE.files = wanted, {}
    if kind not in _STATE.files:
        _STATE.files[kind] = _cache_file(kind, *wanted)
    return _STATE.files[kind]


def cached_entry(kind: str, key: str) -> dict[str, object] | None:
    """The entry `key` of the cache file of `kind` as read from disk (not yet checked)."""
    file = cache_file(kind)
    if file is None:
        return None
    entry = _document(file).get(key)
    return entry if isinstance(entry, dict) else None


def keep_entry(kind: str, key: str, entry: dict[str, object]) -> None:
    """Keep `entry` under `key` for the next flush() of the cache file of `kind`."""
    file = cache_file(kind)
    if file is not None:
        _STATE.pending.setdefault(str(file), {})[key] = entry


def file_identity(path: Path | str) -> list[int] | None:
    """[size, mtime_ns, inode, ctime_ns] of `path` (following links); None when missing."""
    identity = _identity(Path(path))
    return None if identity is None else list(identity)


def lookup(path: Path, collection: str, text: str) -> tuple[Recipe, ...] | None:
    """The recipes of `path` (read for `collection` as `text`) as a former command parsed
    them, where the cache holds this very file and text; None where it does not."""
    identity = _identity(path)
    entry = cached_entry("recipes", _key(path, collection))
    if identity is None or entry is None:
        return None
    if entry.get("identity") != list(identity) or entry.get("text") != text:
        return None
    try:
        return parsed_recipes.decoded(entry.get("recipes"))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # not what this prtoggle writes: parsed again, replaced at the next write


def store(path: Path, collection: str, text: str, recipes: Sequence[Recipe]) -> None:
    """Keep `recipes`, parsed from `text` of `path`, for the next flush()."""
    identity = _identity(path)
    if identity is None:
        return
    keep_entry(
        "recipes",
        _key(path, collection),
        {
            "identity": list(identity),
            "text": text,
            "recipes": parsed_recipes.encoded(tuple(recipes)),
        },
    )


def flush() -> None:
    """Write the entries kept since the last flush into their cache files (atomically); a
    failed write is left at that (logged at DEBUG: every command parses as before)."""
    pending, _STATE.pending = _STATE.pending, {}
    for name, kept in pending.items():
        _write(Path(name), kept)


def reset() -> None:
    """Forget the cache documents read and the entries not yet written (tests)."""
    _STATE.documents.clear()
    _STATE.pending.clear()
    _STATE.files.clear()
    _STATE.files_for = None


def _write(file: Path, kept: dict[str, object]) -> None:
    entries = {**_read(file), **kept}
    document = {"format": FORMAT, "files": entries}
    temporary = file.with_name(f".{file.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(document, out)
        os.replace(temporary, file)
    except OSError as exc:
        logger.debug("recipe cache %s not written: %s", file, exc)
        with contextlib.suppress(OSError):
            temporary.unlink()
        return
    _STATE.documents[str(file)] = entries


def _cache_file(kind: str, setting: str | None, xdg: str | None, home: str) -> Path | None:
    if setting is not None and setting.strip().lower() in ("0", "off"):
        return None
    if setting is not None and setting.strip():
        folder = Path(setting.strip())
    elif xdg and os.path.isabs(xdg):
        folder = Path(xdg) / "prtoggle"
    elif home:
        folder = Path(home) / ".cache" / "prtoggle"
    else:
        return None
    return folder / f"{kind}-{_code_checksum(_SOURCES[kind])}.json"


def _home() -> str:
    home = os.path.expanduser("~")
    return home if home != "~" else ""


def _code_checksum(sources: Sequence[Path]) -> str:
    """The source of the code whose output is kept and prtoggle's `__init__.py` (which
    holds its version), checksummed (CRC-32 and Adler-32: zlib is loaded already,
    hashlib's OpenSSL would cost start-up)."""
    data = [f"{FORMAT}\0".encode()]
    for source in (_PACKAGE / "__init__.py", *sources):
        try:
            data.append(source.read_bytes())
        except OSError:
            data.append(f"unreadable {source}".encode())
    joined = b"\0".join(data)
    return f"{zlib.crc32(joined):08x}{zlib.adler32(joined):08x}"


def _key(path: Path, collection: str) -> str:
    return f"{collection}\0{os.path.abspath(path)}"


def _identity(path: Path) -> Identity | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)


def _document(file: Path) -> dict[str, object]:
    key = str(file)
    if key not in _STATE.documents:
        _STATE.documents[key] = _read(file)
    return _STATE.documents[key]


def _read(file: Path) -> dict[str, object]:
    """The entries of `file`; {} where it is missing, corrupt, too large or not ours."""
    try:
        descriptor = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return {}
    try:
        info = os.fstat(descriptor)
        if not _trusted(info):
            logger.debug("recipe cache %s ignored: not a private file of this user", file)
            return {}
        with os.fdopen(os.dup(descriptor), "rb") as stream:
            document = json.loads(stream.read(MAX_CACHE_BYTES))
    except (OSError, ValueError) as exc:
        logger.debug("recipe cache %s ignored: %s", file, exc)
        return {}
    finally:
        os.close(descriptor)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        return {}
    entries = document.get("files")
    return entries if isinstance(entries, dict) else {}


def _trusted(info: os.stat_result) -> bool:
    """A regular file of at most MAX_CACHE_BYTES, this user's, writable by no one else."""
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_size <= MAX_CACHE_BYTES
        and info.st_uid == os.getuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )

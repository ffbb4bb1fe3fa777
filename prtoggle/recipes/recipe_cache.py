"""Parsed recipes kept between commands: a user cache file, checked against each recipe file.

Every `prtoggle list`/`run`/`check` reads the recipe files; parsing them (PyYAML and the
schema) is most of what the registry costs. Parsed recipes are kept in one JSON file of
the user's cache folder (CACHE_ENV, else `$XDG_CACHE_HOME/prtoggle`, else
`~/.cache/prtoggle`), named after a checksum of prtoggle's version and of the source of the
code that parses recipes: another prtoggle, or a changed parser, uses another file.

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

__all__ = ["CACHE_ENV", "cache_file", "flush", "lookup", "reset", "store"]

CACHE_ENV = "PRTOGGLE_CACHE_DIR"
"""The folder of prtoggle's cache files; `0` or `off` keeps no cache."""
FORMAT = 1
"""Bumped whenever what the cache file holds changes."""
MAX_CACHE_BYTES = 16 * 1024 * 1024
"""A cache file larger than this is not read (and is replaced at the next write)."""
_PARSER_SOURCES = (
    *sorted(Path(__file__).resolve().parent.glob("*.py")),
    Path(__file__).resolve().parents[1] / "patching" / "types.py",
    Path(__file__).resolve().parents[1] / "patching" / "define_code.py",
)
"""The code whose output is cached: recipes/*.py and the patching types recipes are made of."""

logger = logging.getLogger(__name__)

Identity = tuple[int, int, int, int]
"""(size, mtime_ns, inode, ctime_ns) of a recipe file."""


@dataclass
class _State:
    """The cache document read (by cache file), and the entries parsed since the last write."""

    documents: dict[str, dict[str, object]] = field(default_factory=dict)
    pending: dict[str, dict[str, object]] = field(default_factory=dict)
    file: Path | None = None
    file_for: tuple[str | None, str | None, str] | None = None
    """The settings `file` was chosen for: CACHE_ENV, XDG_CACHE_HOME, the home folder."""


_STATE = _State()


def cache_file() -> Path | None:
    """This prtoggle's cache file; None when CACHE_ENV turns the cache off (or no home)."""
    wanted = (os.environ.get(CACHE_ENV), os.environ.get("XDG_CACHE_HOME"), _home())
    if _STATE.file_for != wanted:
        _STATE.file_for, _STATE.file = wanted, _cache_file(*wanted)
    return _STATE.file


def lookup(path: Path, collection: str, text: str) -> tuple[Recipe, ...] | None:
    """The recipes of `path` (read for `collection` as `text`) as a former command parsed
    them, where the cache holds this very file and text; None where it does not."""
    file = cache_file()
    identity = _identity(path)
    if file is None or identity is None:
        return None
    entry = _document(file).get(_key(path, collection))
    if not isinstance(entry, dict):
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
    if identity is None or cache_file() is None:
        return
    _STATE.pending[_key(path, collection)] = {
        "identity": list(identity),
        "text": text,
        "recipes": parsed_recipes.encoded(tuple(recipes)),
    }


def flush() -> None:
    """Write the entries stored since the last flush into the cache file (atomically); a
    failed write is left at that (logged at DEBUG: every command parses as before)."""
    file = cache_file()
    if not _STATE.pending or file is None:
        return
    entries = {**_read(file), **_STATE.pending}
    _STATE.pending = {}
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


def reset() -> None:
    """Forget the cache documents read and the entries not yet written (tests)."""
    _STATE.documents.clear()
    _STATE.pending.clear()
    _STATE.file = _STATE.file_for = None


def _cache_file(setting: str | None, xdg: str | None, home: str) -> Path | None:
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
    return folder / f"recipes-{_parser_hash()}.json"


def _home() -> str:
    home = os.path.expanduser("~")
    return home if home != "~" else ""


def _parser_hash() -> str:
    """prtoggle's version and the source of the code that parses recipes, checksummed
    (CRC-32 and Adler-32: zlib is loaded already, hashlib's OpenSSL would cost start-up)."""
    from prtoggle import __version__

    data = [f"{__version__}\0{FORMAT}\0".encode()]
    for source in _PARSER_SOURCES:
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

"""The installed version of a distribution, as `importlib.metadata.version` finds it.

`importlib.metadata` (and the `email` package it parses metadata with) costs every
process under `prtoggle run` about 10 ms to import. Where sys.meta_path finds
distributions only through the standard path finder and each sys.path entry is a
directory, the same search is made here: the entries in order, the first
`*.dist-info`/`*.egg-info` whose name normalizes to the distribution's, its `METADATA`
(else `PKG-INFO`, else the file itself) read as UTF-8, its first `Version` header. A zip
or egg on the path, a finder of another kind, a metadata file that is not plain
`Key: value` lines, anything unexpected: `importlib.metadata` answers.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
from pathlib import Path

__all__ = ["installed_version", "name_and_version_headers"]


def installed_version(distribution: str) -> str | None:
    """The version of the installed distribution, None when it is not installed."""
    found = _version_on_path(distribution)
    if found is not _ASK_IMPORTLIB:
        return found if isinstance(found, str) else None
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def name_and_version_headers(head: str) -> dict[str, str] | None:
    """`name` and `version` of a metadata head made of plain `Key: value` lines (and
    continuation lines of other keys), as the email parser reads them (the first of
    each, its value after the colon with leading blanks dropped); None for any other
    head (a folded `Name` or `Version`, a line that is not a header, a carriage return),
    which only the email parser reads right."""
    if "\r" in head or head.startswith("From "):
        return None
    found: dict[str, str] = {}
    key = ""
    for line in head.split("\n"):
        if line[:1] in (" ", "\t"):
            if key in ("name", "version"):
                return None  # a folded value: the email parser keeps its line breaks
            continue
        match = _HEADER.fullmatch(line)
        if match is None:
            return None
        key = match["key"].lower()
        if key in ("name", "version") and key not in found:
            found[key] = match["value"].lstrip(" \t")
        elif key in ("name", "version"):
            key = ""  # a repeated key: the first one counts, its folding does not matter
    return found


_HEADER = re.compile(r"(?P<key>[\x21-\x39\x3b-\x7e]+):(?P<value>.*)")
"""A header line as the email parser reads one: a name of printable ASCII but `:`."""


class _AskImportlib:
    """The search met something only importlib.metadata reads the way it does."""


_ASK_IMPORTLIB = _AskImportlib()


def _version_on_path(distribution: str) -> str | _AskImportlib | None:
    if not distribution or not _only_the_path_finder():
        return _ASK_IMPORTLIB
    wanted = re.sub(r"[-_.]+", "-", distribution).lower().replace("-", "_")
    for entry in sys.path:
        if not isinstance(entry, str):
            return _ASK_IMPORTLIB
        root = entry or "."
        try:
            children = os.listdir(root)
        except OSError:
            if os.path.isfile(root):
                return _ASK_IMPORTLIB  # a zip on the path
            continue
        if os.path.basename(entry).lower().endswith(".egg"):
            return _ASK_IMPORTLIB
        for child in children:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            name = low.rpartition(".")[0].partition("-")[0]
            if re.sub(r"[-_.]+", "-", name).lower().replace("-", "_") == wanted:
                return _version_of(Path(entry, child))
    return None


def _only_the_path_finder() -> bool:
    """Whether sys.meta_path finds distributions through the standard path finder alone."""
    return all(
        finder is importlib.machinery.PathFinder
        for finder in sys.meta_path
        if getattr(finder, "find_distributions", None)
    )


def _version_of(info: Path) -> str | _AskImportlib | None:
    """The `Version` header of a metadata folder (or old-style file), as importlib reads it."""
    text = None
    for name in ("METADATA", "PKG-INFO", ""):
        try:
            text = (info / name if name else info).read_text(encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            continue
        except (OSError, UnicodeDecodeError):
            return _ASK_IMPORTLIB
        if text:
            break
    if not text:
        return _ASK_IMPORTLIB
    headers = name_and_version_headers(text.split("\n\n", 1)[0])
    if headers is None:
        return _ASK_IMPORTLIB
    return headers.get("version")

"""Bounded reading of recipe files: regular files only, a size limit, line-carrying values.

No PyYAML here: documents are parsed by prtoggle.recipes.yaml_loader, which a process that
gets its recipes already parsed (prtoggle.recipes.parsed_recipes) never imports.
"""

from __future__ import annotations

import os
import reprlib
import stat
from pathlib import Path
from typing import Any

from prtoggle.errors import RegistryError

MAX_RECIPE_BYTES = 1024 * 1024
"""A recipe file larger than this (1 MiB) is refused before it is parsed."""
MAX_YAML_NODES = 50_000
"""A YAML document larger than this many nodes, with every alias expanded, is refused."""
MAX_SHOWN_CHARS = 200
"""No error message shows more than this many characters of a recipe's value."""


class _ShortRepr(reprlib.Repr):
    """reprlib's bounded repr; the loader's line-carrying containers shown as list and dict."""

    def repr_LineList(self, value: list[Any], level: int) -> str:
        return self.repr_list(value, level)

    def repr_LineDict(self, value: dict[Any, Any], level: int) -> str:
        return self.repr_dict(value, level)


_SHORT = _ShortRepr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, MAX_SHOWN_CHARS, MAX_SHOWN_CHARS
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 6


class LineDict(dict[Any, Any]):
    """A YAML mapping that remembers its own line and the line of every key."""

    line: int
    key_lines: dict[Any, int]


class LineList(list[Any]):
    """A YAML sequence that remembers its line."""

    line: int


def read_recipe_text(path: Path) -> str:
    """The UTF-8 text of a regular file of at most MAX_RECIPE_BYTES; anything else refused.

    The file is opened without blocking (a FIFO never hangs) and its type is checked on
    the open descriptor, so a device, FIFO or directory is refused without being read.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read fix file: {exc.strerror or exc}") from exc
    try:
        data = _read_regular(descriptor, path)
    finally:
        os.close(descriptor)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RegistryError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); recipe files must be UTF-8"
        ) from exc


def short(value: object) -> str:
    """`repr(value)` cut to at most MAX_SHOWN_CHARS characters, without rendering the rest."""
    return short_text(_SHORT.repr(value))


def short_text(text: str, *, limit: int = MAX_SHOWN_CHARS) -> str:
    """`text` cut to at most `limit` characters (`...` marks a cut)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _read_regular(descriptor: int, path: Path) -> bytes:
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        raise RegistryError(
            f"{path}: not a regular file ({_file_kind(info.st_mode)}); a recipe is a "
            "regular .yaml file"
        )
    if info.st_size > MAX_RECIPE_BYTES:
        raise _too_large(path, info.st_size)
    chunks, total = [], 0
    while total <= MAX_RECIPE_BYTES:
        chunk = os.read(descriptor, MAX_RECIPE_BYTES + 1 - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > MAX_RECIPE_BYTES:  # it grew after fstat
        raise _too_large(path, total)
    return b"".join(chunks)


def _too_large(path: Path, size: int) -> RegistryError:
    return RegistryError(
        f"{path}: recipe file is {size} bytes, over the limit of {MAX_RECIPE_BYTES} bytes (1 MiB)"
    )


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((label for test, label in kinds if test(mode)), "not a regular file")

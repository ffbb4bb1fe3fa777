"""Recipes parsed once per run: `prtoggle run` writes what it parsed, its processes reuse it.

Every Python process under `prtoggle run` loads the registry at start-up. So that each one
need not parse the recipe YAML again (nor import PyYAML), the run writes the recipes its
registry holds to PARSED_FILE in its report directory (RUN_REPORT_ENV), each with the text
it was parsed from. A process there takes a recipe from that file only for the very text
it has just read from the recipe file, at the same path and for the same collection:
parsing is a function of those three, so a recipe file changed since, a file or directory
added, another PRTOGGLE_YAML_PATH or sglang's own file changed is parsed again as ever. A
file that is missing, unreadable, malformed or written by another copy of prtoggle is not
used. Process-global: what this process read from recipe files (remember) and the file
it loaded (one per report directory) are kept for the life of the process.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

from prtoggle.patching.types import Edit, Patch
from prtoggle.protocol import RUN_REPORT_ENV
from prtoggle.recipes.names_schema import NameChange, NotReverted
from prtoggle.recipes.schema import Recipe
from prtoggle.recipes.versions import VersionRange

__all__ = ["PARSED_FILE", "decoded", "encoded", "known", "remember", "write"]

PARSED_FILE = "parsed-recipes"
"""The file of a run's report directory that holds its parsed recipes (not a `*.json`
report: the report readers never see it)."""
FORMAT = 1
"""Bumped whenever what the file holds, or how a recipe is written in it, changes."""

_CLASSES: dict[str, type] = {
    cls.__name__: cls for cls in (Recipe, Patch, Edit, VersionRange, NameChange, NotReverted)
}
"""The dataclasses a recipe is made of: the only ones the file may name."""
_OWN_COPY = str(Path(__file__).resolve().parents[1])
"""The prtoggle package this module belongs to: a file written by another is not read."""

Key = tuple[str, str, str]
"""(path, collection, text) of one recipe file (or sglang's own file of several recipes)."""


@dataclass
class _Memo:
    """What this process read from recipe files, and the run's file it loaded (by path)."""

    read: dict[Key, tuple[Recipe, ...]] = field(default_factory=dict)
    loaded: dict[str, dict[Key, tuple[Recipe, ...]]] = field(default_factory=dict)


_MEMO = _Memo()


def known(path: Path, collection: str, text: str) -> tuple[Recipe, ...] | None:
    """The recipes `text`, read from `path` for `collection`, parses to, where this process
    or its run's file has parsed that very text already; None where not (parse it)."""
    key = (str(path), collection, text)
    if key in _MEMO.read:
        return _MEMO.read[key]
    directory = os.environ.get(RUN_REPORT_ENV, "")
    if not directory:
        return None
    file = os.path.join(directory, PARSED_FILE)
    if file not in _MEMO.loaded:
        _MEMO.loaded[file] = _load(file)
    return _MEMO.loaded[file].get(key)


def remember(path: Path, collection: str, text: str, recipes: Sequence[Recipe]) -> None:
    """`text`, read from `path` for `collection`, parsed to `recipes` (written by write())."""
    _MEMO.read[(str(path), collection, text)] = tuple(recipes)


def write(file: Path) -> None:
    """Write every recipe file this process read, with its recipes, to `file` (a new file
    of a run's report directory). A write that fails leaves no file: each process parses."""
    entries = [
        {"path": path, "collection": collection, "text": text, "recipes": encoded(recipes)}
        for (path, collection, text), recipes in _MEMO.read.items()
    ]
    document = {"format": FORMAT, "prtoggle": _OWN_COPY, "files": entries}
    temporary = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(document), encoding="utf-8")
        os.replace(temporary, file)
    except OSError:
        temporary.unlink(missing_ok=True)


def encoded(value: object) -> object:
    """`value` (a recipe or a part of one) as JSON: dataclasses, paths and dates tagged."""
    if is_dataclass(value) and not isinstance(value, type):
        parts = {item.name: encoded(getattr(value, item.name)) for item in fields(value)}
        return {"$": type(value).__name__, **parts}
    if isinstance(value, tuple):
        return [encoded(item) for item in value]
    if isinstance(value, Path):
        return {"$path": str(value)}
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return {"$date": value.isoformat()}
    if value is None or isinstance(value, bool | int | str):
        return value
    raise TypeError(f"a recipe holds {type(value).__name__} {value!r}: {__name__} cannot write it")


def decoded(value: object) -> tuple[Recipe, ...]:
    """The recipes encoded() wrote as a list; TypeError (or KeyError) where it is not one."""
    recipes = _value(value)
    if not isinstance(recipes, tuple) or not all(isinstance(r, Recipe) for r in recipes):
        raise TypeError("not a list of recipes")
    return recipes


def _load(file: str) -> dict[Key, tuple[Recipe, ...]]:
    """The recipes of the run's file by (path, collection, text); {} where it cannot be used."""
    try:
        with open(file, encoding="utf-8") as stream:
            document = json.load(stream)
        if document.get("format") != FORMAT or document.get("prtoggle") != _OWN_COPY:
            return {}
        return {
            (entry["path"], entry["collection"], entry["text"]): decoded(entry["recipes"])
            for entry in document["files"]
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}  # missing, unreadable or not this format: every recipe is parsed


def _value(value: object) -> object:
    """What encoded() wrote, back: every list a tuple, as the frozen dataclasses hold them."""
    if isinstance(value, list):
        return tuple(_value(item) for item in value)
    if not isinstance(value, dict):
        return value
    if "$path" in value:
        return Path(value["$path"])
    if "$date" in value:
        return datetime.date.fromisoformat(value["$date"])
    cls = _CLASSES[value["$"]]
    return cls(**{name: _value(item) for name, item in value.items() if name != "$"})

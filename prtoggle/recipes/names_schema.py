"""The `names:`, `not_reverted:` and `guards:` blocks: names a fix changed, what stays, tests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from prtoggle.errors import RegistryError
from prtoggle.patching.define_code import define_bindings, define_problem
from prtoggle.recipes.patch_schema import DOTTED, expect_mapping, key_at, kind_of, required_str
from prtoggle.recipes.yaml_reading import LineDict, LineList, short

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_NAMES_OPTIONAL = ("define", "remove")
_NOT_REVERTED_REQUIRED = ("file", "line", "reason")
_TEST_NAME = re.compile(r"[A-Za-z_]\w*(\[[^\]\n]*\])?")
GUARD_EXAMPLE = "test/unit/test_x.py::TestX::test_y"
MODULE_REMOVED_REASON = "a module the fix removed"
"""How a `not_reverted` entry of a deleted module starts: its file is absent post-fix."""


@dataclass(frozen=True)
class NameChange:
    """One scope's names: `define` (pre-fix statements run there), `remove` (names the fix added).

    `scope` is a module or `module.Class`; `line` the recipe line of the entry, and
    `define_line` the recipe line the define text starts on (its code is compiled there).
    """

    scope: str
    define: str
    remove: tuple[str, ...]
    line: int
    define_line: int = 0

    @property
    def defined(self) -> tuple[str, ...]:
        """The names `define` binds, in order."""
        return define_bindings(self.define) if self.define.strip() else ()


@dataclass(frozen=True)
class NotReverted:
    """A change of the fix that a revert leaves as the fix made it, and why."""

    file: str
    line: int
    reason: str
    code: str | None = None

    def text(self) -> str:
        """`file:line reason`, how every report lists it."""
        return f"{self.file}:{self.line} {self.reason}"


def validate_names(mapping: LineDict, path: Path) -> tuple[NameChange, ...]:
    """The `names:` list of a recipe mapping (absent: none)."""
    if "names" not in mapping:
        return ()
    items = _list(mapping, "names", path, what="{scope, define, remove} mappings")
    changes = []
    for item in items:
        entry = expect_mapping(
            item,
            path,
            line=items.line,
            what="names entry",
            required=("scope",),
            optional=_NAMES_OPTIONAL,
        )
        changes.append(_name_change(entry, path))
    return tuple(changes)


def validate_not_reverted(mapping: LineDict, path: Path) -> tuple[NotReverted, ...]:
    """The `not_reverted:` list of a recipe mapping (absent: none)."""
    if "not_reverted" not in mapping:
        return ()
    items = _list(mapping, "not_reverted", path, what="{file, line, reason[, code]} mappings")
    kept = []
    for item in items:
        entry = expect_mapping(
            item,
            path,
            line=items.line,
            what="not_reverted entry",
            required=_NOT_REVERTED_REQUIRED,
            optional=("code",),
        )
        line = entry["line"]
        if not isinstance(line, int) or isinstance(line, bool) or line < 1:
            raise RegistryError(
                f"{key_at(path, entry, 'line')}: 'line' must be a line number >= 1, got "
                f"{kind_of(line)} {short(line)}"
            )
        reason = required_str(entry, "reason", path)
        if "\n" in reason.strip():
            raise RegistryError(
                f"{key_at(path, entry, 'reason')}: 'reason' must be one line, got {short(reason)}"
            )
        code = required_str(entry, "code", path).strip() if "code" in entry else None
        file = required_str(entry, "file", path)
        kept.append(NotReverted(file=file, line=line, reason=reason.strip(), code=code))
    return tuple(kept)


def validate_guards(mapping: LineDict, path: Path) -> tuple[str, ...]:
    """The `guards:` list of a recipe mapping (absent: none): the tests the fix added or
    changed, each a pytest node id or a test file path under the repository root."""
    if "guards" not in mapping:
        return ()
    items, where = mapping["guards"], key_at(path, mapping, "guards")
    if not isinstance(items, list):
        raise RegistryError(
            f"{where}: 'guards' must be a list of pytest node ids or test file paths like "
            f"{GUARD_EXAMPLE!r}, got {short(items)}"
        )
    for item in items:
        problem = guard_problem(item)
        if problem is not None:
            raise RegistryError(f"{where}: 'guards' entry {short(item)} {problem}")
    twice = next((item for index, item in enumerate(items) if item in items[:index]), None)
    if twice is not None:
        raise RegistryError(f"{where}: 'guards' lists {twice!r} twice; each test once")
    return tuple(items)


def guard_problem(value: object) -> str | None:
    """Why `value` is not a guard (None when it is): a relative posix path of a `.py` file,
    no `..`, optionally followed by `::Name` parts (a pytest node id)."""
    expected = f"; expected a pytest node id or a test file path like {GUARD_EXAMPLE!r}"
    if not isinstance(value, str) or not value.strip():
        return f"is not a non-empty string{expected}"
    file, *parts = value.split("::")
    if file.startswith("/") or "\\" in file or ".." in file.split("/"):
        where = "relative to the repository root (posix '/', no leading '/', no '..')"
        return f"is not {where}{expected}"
    if not file.endswith(".py") or any(not piece for piece in file.split("/")):
        return f"does not name a .py file{expected}"
    if not all(_TEST_NAME.fullmatch(part) for part in parts):
        return f"has a part after '::' that is not a test or class name{expected}"
    return None


def _name_change(entry: LineDict, path: Path) -> NameChange:
    scope = required_str(entry, "scope", path)
    if not DOTTED.fullmatch(scope) or scope.split(".", 1)[0] == "__main__":
        raise RegistryError(
            f"{key_at(path, entry, 'scope')}: 'scope' must be a dotted module or "
            f"module.Class (not __main__), got {short(scope)}"
        )
    if "define" not in entry and "remove" not in entry:
        raise RegistryError(
            f"{path}:{entry.line}: names entry of {scope} has neither 'define' nor 'remove'; "
            "give at least one"
        )
    define = required_str(entry, "define", path) if "define" in entry else ""
    define_line = _define_line(entry, path)
    problem = define_problem(define) if define else None
    if problem is not None:
        raise RegistryError(
            f"{path}:{define_line + problem.line - 1}: define of {scope}: {problem.message}"
        )
    remove = _remove(entry, path)
    both = [name for name in (define_bindings(define) if define else ()) if name in remove]
    if both:
        raise RegistryError(
            f"{key_at(path, entry, 'remove')}: names entry of {scope} both defines and removes "
            f"{both[0]!r}; a name is either bound to its pre-fix value or removed"
        )
    return NameChange(
        scope=scope, define=define, remove=remove, line=entry.line, define_line=define_line
    )


def _remove(entry: LineDict, path: Path) -> tuple[str, ...]:
    if "remove" not in entry:
        return ()
    value = entry["remove"]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(name, str) and _IDENTIFIER.fullmatch(name) for name in value)
    ):
        raise RegistryError(
            f"{key_at(path, entry, 'remove')}: 'remove' must be a non-empty list of "
            f"identifiers like [new_helper, NEW_FLAG], got {short(value)}"
        )
    if len(set(value)) != len(value):
        twice = next(name for name in value if value.count(name) > 1)
        raise RegistryError(f"{key_at(path, entry, 'remove')}: 'remove' lists {twice!r} twice")
    return tuple(value)


def _define_line(entry: LineDict, path: Path) -> int:
    """The recipe line the define text starts on: the line after `define: |`, else its own."""
    line = entry.key_lines.get("define", entry.line)
    value = entry.get("define")
    return line + 1 if isinstance(value, str) and "\n" in value else line


def _list(mapping: LineDict, key: str, path: Path, *, what: str) -> LineList:
    items = mapping[key]
    if not isinstance(items, LineList) or not items:
        raise RegistryError(
            f"{key_at(path, mapping, key)}: {key!r} must be a non-empty list of {what}, "
            f"got {short(items)}"
        )
    return items

"""Read a git-style unified diff: its files and hunks; undo it on post-fix text."""

from __future__ import annotations

import re
from dataclasses import dataclass

from prtoggle.errors import RegistryError
from prtoggle.patching.lines import split_lines, without_byte_order_mark

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DEV_NULL = "/dev/null"


class DiffError(RegistryError):
    """A diff cannot be read, or does not apply to the post-fix source it names."""


@dataclass(frozen=True)
class DiffLine:
    """One line of a hunk: its kind (' ', '-', '+'), text (no newline) and file lines.

    `old` and `new` are the 1-based lines it has (or, for a line the other side lacks,
    the line it sits before) in the pre-fix and post-fix file.
    """

    kind: str
    text: str
    old: int
    new: int


@dataclass(frozen=True)
class FileDiff:
    """The hunks of one file: `path` the post-fix path without `b/` (pre-fix when deleted)."""

    path: str
    old_path: str | None
    new_path: str | None
    lines: tuple[DiffLine, ...]

    @property
    def added(self) -> bool:
        return self.old_path is None

    @property
    def deleted(self) -> bool:
        return self.new_path is None


def parse_diff(text: str, *, source: str) -> list[FileDiff]:
    """The files of a unified diff as git writes it (`diff --git`, `---`/`+++`, hunks)."""
    files: list[FileDiff] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        header = lines[index].startswith("--- ") and index + 1 < len(lines)
        if header and lines[index + 1].startswith("+++ "):
            old_path = _path(lines[index][4:])
            new_path = _path(lines[index + 1][4:])
            body, index = _hunks(lines, index + 2, source=source)
            path = new_path or old_path
            if path is None:
                raise DiffError(f"{source}:{index}: both sides of a file are /dev/null")
            files.append(FileDiff(path, old_path, new_path, tuple(body)))
            continue
        index += 1
    if not files:
        raise DiffError(
            f"{source}: no file in the diff; expected a unified diff as git writes it "
            "(`--- a/path`, `+++ b/path`, `@@ -l,n +l,n @@` hunks)"
        )
    return files


def undo(new_text: str, diff: FileDiff, *, source: str) -> str:
    """The pre-fix text of a file: `diff` undone on its post-fix text (context must agree)."""
    new_lines = split_lines(new_text)
    out: list[str] = []
    cursor = 1
    for line in diff.lines:
        while cursor < line.new:
            out.append(new_lines[cursor - 1])
            cursor += 1
        if line.kind == "-":
            out.append(line.text)
            continue
        have = new_lines[line.new - 1] if line.new <= len(new_lines) else None
        if have is None or have.rstrip() != line.text.rstrip():
            raise DiffError(
                f"{source}: {diff.path}:{line.new}: the diff says {line.text.strip()!r}, "
                f"the source root has {'nothing' if have is None else repr(have.strip())}; "
                "expected the post-fix source the diff was made from (--source-root)"
            )
        if line.kind == " ":
            out.append(have)
        cursor += 1
    out.extend(new_lines[cursor - 1 :])
    return "\n".join(out) + "\n"


def _hunks(lines: list[str], index: int, *, source: str) -> tuple[list[DiffLine], int]:
    body: list[DiffLine] = []
    while index < len(lines):
        found = _HUNK.match(lines[index])
        if found is None:
            break
        old, new = int(found.group(1)), int(found.group(3))
        old_left = int(found.group(2) if found.group(2) is not None else 1)
        new_left = int(found.group(4) if found.group(4) is not None else 1)
        old += old_left == 0
        new += new_left == 0
        index += 1
        while old_left > 0 or new_left > 0:
            if index >= len(lines):
                raise DiffError(f"{source}:{index}: the hunk ends early; expected more lines")
            raw = lines[index]
            kind, text = (raw[:1] or " "), raw[1:]
            if kind not in " -+":
                if kind == "\\":
                    index += 1
                    continue
                raise DiffError(
                    f"{source}:{index + 1}: {raw[:40]!r} in a hunk; expected a line starting "
                    "with ' ', '-' or '+'"
                )
            if (kind != "+" and old == 1) or (kind != "-" and new == 1):
                text = without_byte_order_mark(text)  # as Python reads a file's line 1
            body.append(DiffLine(kind, text, old, new))
            old += kind != "+"
            new += kind != "-"
            old_left -= kind != "+"
            new_left -= kind != "-"
            index += 1
        while index < len(lines) and lines[index].startswith("\\"):
            index += 1
    return body, index


def _path(raw: str) -> str | None:
    name = raw.split("\t", 1)[0].strip()
    if name == _DEV_NULL:
        return None
    if name.startswith('"') and name.endswith('"'):
        name = name[1:-1]
    return name[2:] if name[:2] in ("a/", "b/") else name

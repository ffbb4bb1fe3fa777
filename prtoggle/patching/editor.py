"""Text edits on function source: match whitespace-stripped lines once, re-indent, track lines."""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.types import Edit

NEAREST_WINDOW_COUNT = 3


@dataclass(frozen=True)
class SourceLine:
    """One line of (edited) source and the real file line it is attributed to."""

    text: str
    origin: int


@dataclass(frozen=True)
class EditedSource:
    """Source text after edits, with the real file line of every line.

    Unchanged lines keep their own line number. Lines an edit inserts are attributed
    to the first line of the edit's match, so a traceback through them points at the
    code the edit changed and line numbers never decrease along the source.
    """

    lines: tuple[SourceLine, ...]

    @property
    def text(self) -> str:
        return "".join(f"{line.text}\n" for line in self.lines)

    @property
    def origins(self) -> tuple[int, ...]:
        return tuple(line.origin for line in self.lines)


@dataclass(frozen=True)
class EditContext:
    """Where the edits come from and what they apply to, for error messages."""

    target: str
    filename: str
    yaml_path: str | None = None


def source_lines(source: str, *, first_line: int) -> tuple[SourceLine, ...]:
    """Split source into lines numbered from `first_line` (the line of its first line)."""
    return tuple(
        SourceLine(text=text, origin=first_line + index)
        for index, text in enumerate(source.splitlines())
    )


def edit_source(
    source: str, edits: Sequence[Edit], *, first_line: int, context: EditContext
) -> EditedSource:
    """Apply `edits` in order to `source` (whose first line is file line `first_line`).

    Every edit's match must occur exactly once, comparing whitespace-stripped lines with
    blank lines ignored on both sides; otherwise PatchApplicationError shows the match
    and the nearest (or every matching) window with real file line numbers.
    """
    lines = source_lines(source, first_line=first_line)
    return edit_lines(lines, edits, context=context)


def edit_lines(
    lines: Sequence[SourceLine], edits: Sequence[Edit], *, context: EditContext
) -> EditedSource:
    """Apply `edits` in order to already numbered lines (see edit_source)."""
    current = list(lines)
    for index, edit in enumerate(edits, start=1):
        current = _apply_edit(
            current,
            edit,
            label=_edit_label(context, index, len(edits), edit),
            filename=context.filename,
        )
    return EditedSource(lines=tuple(current))


def match_lines(match: str) -> tuple[str, ...]:
    """The whitespace-stripped, non-blank lines an edit's `match` compares."""
    return tuple(stripped for stripped in (line.strip() for line in match.splitlines()) if stripped)


def reindent(text: str, indent: str) -> list[str]:
    """Dedent `text` as a block and indent it to `indent`, keeping relative indentation."""
    block = textwrap.dedent(text)
    return [f"{indent}{line}" if line.strip() else "" for line in block.splitlines()]


def _apply_edit(
    lines: list[SourceLine], edit: Edit, *, label: str, filename: str
) -> list[SourceLine]:
    wanted = match_lines(edit.match)
    if not wanted:
        raise PatchApplicationError(
            f"{label}: the match has no non-blank line; expected code to match"
        )
    nonblank = [i for i, line in enumerate(lines) if line.text.strip()]
    starts = [
        k
        for k in range(len(nonblank) - len(wanted) + 1)
        if all(lines[nonblank[k + j]].text.strip() == wanted[j] for j in range(len(wanted)))
    ]
    if len(starts) != 1:
        raise PatchApplicationError(
            _mismatch_message(lines, nonblank, wanted, starts, label=label, filename=filename)
        )
    first = nonblank[starts[0]]
    last = nonblank[starts[0] + len(wanted) - 1]
    anchor = lines[first]
    indent = anchor.text[: len(anchor.text) - len(anchor.text.lstrip())]
    new = [SourceLine(text=text, origin=anchor.origin) for text in reindent(edit.text, indent)]
    if edit.kind == "replacement":
        if not any(line.text.strip() for line in new):
            new = []
        return [*lines[:first], *new, *lines[last + 1 :]]
    if edit.kind == "prepend":
        return [*lines[:first], *new, *lines[first:]]
    appended = [SourceLine(text=line.text, origin=lines[last].origin) for line in new]
    return [*lines[: last + 1], *appended, *lines[last + 1 :]]


def _edit_label(context: EditContext, index: int, count: int, edit: Edit) -> str:
    where = f"{context.yaml_path}:{edit.line}" if context.yaml_path else f"line {edit.line}"
    return f"{context.target}: edit {index} of {count} ({where})"


def _mismatch_message(
    lines: Sequence[SourceLine],
    nonblank: Sequence[int],
    wanted: Sequence[str],
    starts: Sequence[int],
    *,
    label: str,
    filename: str,
) -> str:
    span = f"{filename}:{lines[0].origin}-{lines[-1].origin}" if lines else filename
    head = [
        f"{label} matched {len(starts)} times in {span}; expected exactly 1.",
        "match (whitespace-stripped, blank lines ignored):",
        *(f"    {text}" for text in wanted),
    ]
    windows: list[tuple[int, float | None]]
    if starts:
        windows = [(start, None) for start in starts]
        head.append("matching windows:")
    else:
        windows = _nearest_windows(lines, nonblank, wanted)
        head.append("nearest windows:" if windows else "nearest windows: none (source is empty)")
    for start, score in windows:
        chosen = [lines[i] for i in nonblank[start : start + len(wanted)]]
        first, last = chosen[0].origin, chosen[-1].origin
        where = f"{filename}:{first}" if first == last else f"{filename}:{first}-{last}"
        head.append(f"  {where}" + ("" if score is None else f" (similarity {score:.0%})"))
        head.extend(f"    {line.origin:>4} | {line.text.rstrip()}" for line in chosen)
    return "\n".join(head)


def _nearest_windows(
    lines: Sequence[SourceLine], nonblank: Sequence[int], wanted: Sequence[str]
) -> list[tuple[int, float | None]]:
    if not nonblank:
        return []
    size = min(len(wanted), len(nonblank))
    scored: list[tuple[float, int]] = []
    for start in range(len(nonblank) - size + 1):
        window = [lines[i].text.strip() for i in nonblank[start : start + size]]
        ratios = [
            difflib.SequenceMatcher(None, have, want).ratio()
            for have, want in zip(window, wanted, strict=False)
        ]
        scored.append((sum(ratios) / len(wanted), start))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [(start, score) for score, start in scored[:NEAREST_WINDOW_COUNT]]

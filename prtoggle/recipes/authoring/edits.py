"""Edits that turn a function's post-fix text into its pre-fix text, with short unique matches."""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Sequence

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.editor import edit_text
from prtoggle.patching.lines import split_lines
from prtoggle.patching.types import Edit

MAX_CONTEXT = 40
"""Context lines an edit's match may grow by before the edits are given up on."""


class NoUniqueMatch(PatchApplicationError):
    """No short enough window around a change matches exactly once."""


def function_edits(new: Sequence[str], old: Sequence[str]) -> list[Edit]:
    """Edits, top to bottom, that turn lines `new` into `old`, blank lines included.

    Each edit's match is the changed lines (or, for lines to insert, a neighbour) grown
    by the fewest context lines that make it occur once in the text the edit meets, and
    the edit is verified with the editor itself: it must give the expected lines exactly
    (a line of only whitespace that an edit writes comes out empty: then trailing
    whitespace is let go, and the edits are the closest the editor can give).
    """
    try:
        return _edits(new, old, exact=True)
    except NoUniqueMatch:
        return _edits(new, old, exact=False)


def _edits(new: Sequence[str], old: Sequence[str], *, exact: bool) -> list[Edit]:
    working = list(new)
    edits: list[Edit] = []
    shift = 0
    matcher = difflib.SequenceMatcher(None, list(new), list(old), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start, stop = i1 + shift, i2 + shift
        edit = _shortest_edit(working, start, stop, list(old[j1:j2]), exact=exact)
        edits.append(edit)
        working[start:stop] = old[j1:j2]
        shift += (j2 - j1) - (i2 - i1)
    return edits


def _shortest_edit(
    working: list[str], start: int, stop: int, old: list[str], *, exact: bool
) -> Edit:
    expected = _key([*working[:start], *old, *working[stop:]], exact=exact)
    above = [i for i in range(start - 1, -1, -1) if working[i].strip()]
    below = [i for i in range(stop, len(working)) if working[i].strip()]
    changed = [i for i in range(start, stop) if working[i].strip()]
    for extra in range(MAX_CONTEXT + 1):
        for up in range(extra + 1):
            down = extra - up
            if up > len(above) or down > len(below):
                continue
            window = sorted([*above[:up], *changed, *below[:down]])
            for edit in _candidates(working, (start, stop), old, window):
                if _applies(working, edit, expected, exact=exact):
                    return edit
    raise NoUniqueMatch(
        f"no window of at most {MAX_CONTEXT} context lines around line {start + 1} "
        "matches exactly once"
    )


def _candidates(
    working: list[str], span: tuple[int, int], old: list[str], window: list[int]
) -> list[Edit]:
    """The edits whose match is the lines `window` (sorted indices; blank ones skipped):
    for an insertion, `old` put before or after it; then the lines it spans replaced."""
    if not window:
        return []
    start, stop = span
    first, last = window[0], window[-1] + 1
    match = _block(working[first:last])
    out = []
    if start == stop and _block(old):
        if first >= stop:
            out.append(Edit(match=match, kind="prepend", text=_block(old), line=0))
        if last <= start:
            out.append(Edit(match=match, kind="append", text=_block(old), line=0))
    if first <= start and last >= stop:
        text = [*working[first:start], *old, *working[stop:last]]
        out.append(Edit(match=match, kind="replacement", text=_block(text), line=0))
    return out


def _applies(working: list[str], edit: Edit, expected: list[str], *, exact: bool) -> bool:
    source = "".join(f"{line}\n" for line in working)
    try:
        result = edit_text(source=source, edits=[edit])
    except PatchApplicationError:
        return False
    return _key(split_lines(result), exact=exact) == expected


def _block(lines: Sequence[str]) -> str:
    text = textwrap.dedent("".join(f"{line}\n" for line in lines))
    return text if text.strip() else ""


def _key(lines: Sequence[str], *, exact: bool) -> list[str]:
    return list(lines) if exact else [line.rstrip() for line in lines]


def _nonblank(lines: Sequence[str]) -> list[str]:
    return [line.rstrip() for line in lines if line.strip()]

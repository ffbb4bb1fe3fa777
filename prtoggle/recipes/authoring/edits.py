"""Edits that turn a function's post-fix text into its pre-fix text, with short unique matches."""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Sequence

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.editor import edit_span, spliced_lines
from prtoggle.patching.types import Edit
from prtoggle.recipes.authoring.opcodes import line_opcodes

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
    stripped = [line.strip() for line in working]
    counts = Counter(stripped)
    edits: list[Edit] = []
    shift = 0
    for tag, i1, i2, j1, j2 in line_opcodes(new, old):
        if tag == "equal":
            continue
        start, stop = i1 + shift, i2 + shift
        lines = list(old[j1:j2])
        edit = _shortest_edit(working, (stripped, counts), (start, stop), lines, exact=exact)
        edits.append(edit)
        counts.subtract(stripped[start:stop])
        working[start:stop] = lines
        stripped[start:stop] = [line.strip() for line in lines]
        counts.update(stripped[start : start + len(lines)])
        shift += (j2 - j1) - (i2 - i1)
    return edits


def _shortest_edit(
    working: list[str],
    keys: tuple[list[str], Counter[str]],
    span: tuple[int, int],
    old: list[str],
    *,
    exact: bool,
) -> Edit:
    """The edit with the fewest context lines that turns working[start:stop] into `old`
    and nothing else. `keys`: the stripped lines and how often each occurs. A try whose
    first line occurs once costs the size of its window (no search, no copy of the
    text), so drafting stays linear in the edits of one function."""
    stripped, counts = keys
    start, stop = span
    above = _nonblank(stripped, range(start - 1, -1, -1))
    below = _nonblank(stripped, range(stop, len(working)))
    changed = [i for i in range(start, stop) if stripped[i]]
    for extra in range(MAX_CONTEXT + 1):
        for up in range(extra + 1):
            down = extra - up
            if up > len(above) or down > len(below):
                continue
            window = sorted([*above[:up], *changed, *below[:down]])
            alone = window[0] if window and counts[stripped[window[0]]] == 1 else None
            for edit in _candidates(working, span, old, window):
                if _applies(working, (stripped, alone), edit, (span, old), exact=exact):
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


def _applies(
    working: list[str],
    keys: tuple[list[str], int | None],
    edit: Edit,
    wanted: tuple[tuple[int, int], list[str]],
    *,
    exact: bool,
) -> bool:
    """Whether the editor, given `edit` on `working`, gives working[start:stop] replaced by
    `old` (`wanted`) and nothing else: the one window it matches (editor.edit_span) and
    the lines it writes there (editor.spliced_lines), compared where the two texts can
    differ; the lines before and after that stretch are the same objects on both sides."""
    (start, stop), old = wanted
    stripped, alone = keys
    span = edit_span(stripped, edit, alone_at=alone)
    if span is None:
        return False
    first, stop_in, new = spliced_lines(working[span[0] : span[1] + 1], edit)
    cut = (span[0] + first, span[0] + stop_in)
    if cut[0] - cut[1] + len(new) != start - stop + len(old):
        return False
    low, high = min(cut[0], start), max(cut[1], stop)
    made = [*working[low : cut[0]], *new, *working[cut[1] : high]]
    expected = [*working[low:start], *old, *working[stop:high]]
    return _key(made, exact=exact) == _key(expected, exact=exact)


def _block(lines: Sequence[str]) -> str:
    text = textwrap.dedent("".join(f"{line}\n" for line in lines))
    return text if text.strip() else ""


def _key(lines: Sequence[str], *, exact: bool) -> list[str]:
    return list(lines) if exact else [line.rstrip() for line in lines]


def _nonblank(stripped: Sequence[str], indices: range) -> list[int]:
    """The first MAX_CONTEXT + 1 of `indices` whose line is not blank."""
    found: list[int] = []
    for index in indices:
        if stripped[index]:
            found.append(index)
            if len(found) > MAX_CONTEXT:
                break
    return found

"""Re-anchor one edit whose match drifted: a three-way merge onto the new function text."""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.editor import edit_text
from prtoggle.patching.types import Edit

MIN_SIMILARITY = 0.6
"""A drifted window must be at least this similar to the edit's match (0..1)."""
MIN_MARGIN = 0.15
"""...and this much more similar than any other window not overlapping it."""
SIZE_SLACK = 2
"""Windows of the match's length, up to this many lines shorter or longer, are compared."""

_NO_CLEAN_MERGE = (
    "merged onto the most similar window, the edit does not apply cleanly there (its new "
    "match is not unique in the function, or the result is not the merged text); rewrite "
    "this edit by hand"
)


@dataclass(frozen=True)
class Reanchored:
    """The outcome: the new edit (None when declined), the best window's similarity and,
    when declined, why."""

    edit: Edit | None
    similarity: float
    reason: str = ""


def reanchor(text: str, edit: Edit) -> Reanchored:
    """The edit moved onto the window of `text` its match drifted to, or declined.

    Declined (edit None), with the reason, when no window is similar enough, when the
    drift and the edit change the same or adjacent lines of the match in the most similar
    window, when another window is nearly as similar, or when the merged edit does not
    give exactly the merged text.
    """
    lines = text.splitlines()
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    match = _nonblank(edit.match)
    if not match or not nonblank:
        return Reanchored(None, 0.0, "nothing to compare (an empty match or function)")
    scored = _windows(lines, nonblank, match)
    best_score, best = scored[0]
    rivals = [s for s, w in scored[1:] if w[0] > best[-1] or w[-1] < best[0]]
    if best_score < MIN_SIMILARITY:
        return Reanchored(None, best_score, f"no window as similar as {MIN_SIMILARITY}")
    window = [lines[i] for i in best]
    merged = _merge(match, _nonblank(edit.text), window, kind=edit.kind)
    if merged is None:  # decisive: even a window without rivals could not take the edit
        return Reanchored(None, best_score, _same_lines_reason(edit, lines, best))
    if rivals and best_score - rivals[0] < MIN_MARGIN:
        return Reanchored(
            None,
            best_score,
            f"two windows about as similar ({best_score:.2f} and {rivals[0]:.2f}, "
            f"margin under {MIN_MARGIN})",
        )
    new = Edit(match=_block(window), kind=edit.kind, text=_block(merged), line=edit.line)
    if edit.kind != "replacement":
        new = Edit(match=_block(window), kind=edit.kind, text=edit.text, line=edit.line)
    expected = [*lines[: best[0]], *merged, *lines[best[-1] + 1 :]]
    if not _gives(text, new, expected):
        return Reanchored(None, best_score, _NO_CLEAN_MERGE)
    return Reanchored(new, best_score)


def best_similarity(text: str, match: str) -> float:
    """How similar the window of `text` most like `match` is (0..1; 1.0 when it occurs).

    The windows and their similarity are those `reanchor` compares. Windows holding more
    of the match's lines are scored first, and one that cannot beat the best so far (by
    difflib's quick upper bounds) is not scored in full.
    """
    lines = text.splitlines()
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    wanted = _nonblank(match)
    if not wanted or not nonblank:
        return 0.0
    keys = {line.strip() for line in wanted}
    hits = [int(line.strip() in keys) for line in lines]
    windows = sorted(_window_spans(nonblank, len(wanted)), key=lambda w: -sum(hits[i] for i in w))
    best, joined = 0.0, _joined(wanted)
    for window in windows:
        matcher = difflib.SequenceMatcher(None, joined, _joined(lines, window))
        if matcher.real_quick_ratio() > best and matcher.quick_ratio() > best:
            best = max(best, matcher.ratio())
    return best


def _windows(
    lines: Sequence[str], nonblank: Sequence[int], match: Sequence[str]
) -> list[tuple[float, list[int]]]:
    """The windows that can decide the re-anchoring, most similar first (ties: in span
    order): every window whose similarity may come within MIN_MARGIN of the best. A
    window that cannot (by difflib's quick upper bounds) is left out, unscored."""
    wanted = _joined(match)
    bounded = []
    for order, window in enumerate(_window_spans(nonblank, len(match))):
        matcher = difflib.SequenceMatcher(None, wanted, _joined(lines, window))
        bounded.append((matcher.real_quick_ratio(), order, window, matcher))
    bounded.sort(key=lambda item: (-item[0], item[1]))
    best = 0.0
    scored: list[tuple[float, int, list[int]]] = []
    for bound, order, window, matcher in bounded:
        if bound < best - MIN_MARGIN:
            break
        if matcher.quick_ratio() < best - MIN_MARGIN:
            continue
        score = matcher.ratio()
        best = max(best, score)
        scored.append((score, order, window))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [(score, window) for score, _, window in scored] or [(0.0, [])]


def _window_spans(nonblank: Sequence[int], size: int) -> list[list[int]]:
    """Runs of `size` non-blank lines, up to SIZE_SLACK shorter or longer, shortest first."""
    return [
        list(nonblank[start : start + length])
        for length in range(max(1, size - SIZE_SLACK), size + SIZE_SLACK + 1)
        for start in range(len(nonblank) - length + 1)
    ]


def _joined(lines: Sequence[str], indices: Sequence[int] | None = None) -> str:
    """The stripped lines (those at `indices`, else all) joined by newlines."""
    chosen = lines if indices is None else [lines[i] for i in indices]
    return "\n".join(line.strip() for line in chosen)


def _merge(
    base: Sequence[str], ours: Sequence[str], theirs: Sequence[str], *, kind: str
) -> list[str] | None:
    """Both changes of `base` (ours: the edit's, theirs: the drift) applied, in `theirs`'s
    indentation; None when they touch the same or adjacent base lines."""
    keys = [line.strip() for line in base]
    drift = _changes(keys, [line.strip() for line in theirs])
    if kind != "replacement":
        return list(theirs)
    edit = _changes(keys, [line.strip() for line in ours])
    if any(a[0] <= b[1] and b[0] <= a[1] for a in drift for b in edit):
        return None
    indent = theirs[0][: len(theirs[0]) - len(theirs[0].lstrip())]
    ours_lines = [f"{indent}{line}" for line in textwrap.dedent("\n".join(ours)).splitlines()]
    out: list[str] = []
    position = 0
    changes = [(a[2], a[3], theirs[a[4] : a[5]]) for a in drift]
    changes += [(b[2], b[3], ours_lines[b[4] : b[5]]) for b in edit]
    for start, stop, lines in sorted(changes, key=lambda change: change[0]):
        out.extend(_theirs_for(base, theirs, position, start))
        out.extend(lines)
        position = stop
    out.extend(_theirs_for(base, theirs, position, len(base)))
    return out


def _changes(
    base: Sequence[str], other: Sequence[str]
) -> list[tuple[int, int, int, int, int, int]]:
    """Non-equal opcodes as (lo, hi, i1, i2, j1, j2): base lines lo..hi are touched (an
    insertion touches both neighbours), base[i1:i2] becomes other[j1:j2]."""
    matcher = difflib.SequenceMatcher(None, list(base), list(other), autojunk=False)
    return [
        (i1 - (i1 == i2), max(i1, i2 - 1), i1, i2, j1, j2)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _same_lines_reason(edit: Edit, lines: Sequence[str], best: Sequence[int]) -> str:
    """The drift and the edit change the same (or adjacent) lines: which line, and how."""
    keys = [line.strip() for line in _nonblank(edit.match)]
    window = [lines[i] for i in best]
    drift = _changes(keys, [line.strip() for line in window])
    ours = _changes(keys, [line.strip() for line in _nonblank(edit.text)])
    clash = [a for a in drift if any(a[0] <= b[1] and b[0] <= a[1] for b in ours)]
    where = f": {_drift_text(clash[0], keys, window, best)}" if clash else ""
    return (
        "the code changed the same or an adjacent line the edit changes, so the two "
        f"changes cannot be merged{where}; rewrite this edit by hand"
    )


def _drift_text(
    change: tuple[int, int, int, int, int, int],
    keys: Sequence[str],
    window: Sequence[str],
    best: Sequence[int],
) -> str:
    _, _, i1, i2, j1, j2 = change
    line = f"line {best[j1] + 1} of the function" if j1 < j2 else "the function"
    if i1 < i2 and j1 < j2:
        return f"the match's {keys[i1]!r} now reads {window[j1].strip()!r} ({line})"
    if j1 < j2:
        return f"{window[j1].strip()!r} was added inside the match ({line})"
    return f"the match's {keys[i1]!r} was removed"


def _theirs_for(base: Sequence[str], theirs: Sequence[str], start: int, stop: int) -> list[str]:
    """The lines of `theirs` equal to base[start:stop] (unchanged by the drift)."""
    keys = [line.strip() for line in theirs]
    matcher = difflib.SequenceMatcher(None, [b.strip() for b in base], keys, autojunk=False)
    out: list[str] = []
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal":
            out.extend(theirs[j1 + k - i1] for k in range(max(i1, start), min(i2, stop)))
    return out


def _gives(text: str, edit: Edit, expected: Sequence[str]) -> bool:
    try:
        result = edit_text(source=text, edits=[edit])
    except PatchApplicationError:
        return False
    return _key(result.splitlines()) == _key(expected)


def _nonblank(text: str) -> list[str]:
    return [line for line in textwrap.dedent(text).splitlines() if line.strip()]


def _block(lines: Sequence[str]) -> str:
    return textwrap.dedent("".join(f"{line}\n" for line in lines))


def _key(lines: Sequence[str]) -> list[str]:
    return [line.rstrip() for line in lines if line.strip()]

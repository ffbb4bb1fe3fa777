"""Line opcodes of two texts, difflib's for a function of ordinary size, anchored for a long one."""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Sequence

Opcode = tuple[str, int, int, int, int]
Block = tuple[int, int, int]

DIFFLIB_LINES = 2000
"""Up to this many lines (both sides together) difflib's SequenceMatcher aligns the texts
whole, as `new` always did. Its matching is quadratic when many short matches tie (a long
function with thousands of one-line changes); past this size, and inside the stretches of
such texts, the alignment is anchored first on lines that occur once on each side (the
longest run of them in order), and difflib aligns what lies between two anchors."""


def line_opcodes(new: Sequence[str], old: Sequence[str]) -> list[Opcode]:
    """(tag, i1, i2, j1, j2) turning `new` into `old`, as SequenceMatcher.get_opcodes gives."""
    blocks: list[Block] = []
    _match(new, old, (0, len(new)), (0, len(old)), blocks)
    blocks.append((len(new), len(old), 0))
    opcodes: list[Opcode] = []
    i = j = 0
    for block_a, block_b, size in _merged(blocks):
        tag = {(True, True): "replace", (True, False): "delete", (False, True): "insert"}.get(
            (i < block_a, j < block_b)
        )
        if tag is not None:
            opcodes.append((tag, i, block_a, j, block_b))
        i, j = block_a + size, block_b + size
        if size:
            opcodes.append(("equal", block_a, i, block_b, j))
    return opcodes


def _match(
    a: Sequence[str], b: Sequence[str], span_a: tuple[int, int], span_b: tuple[int, int],
    blocks: list[Block],
) -> None:  # fmt: skip
    """Append the matching blocks of a[span_a] and b[span_b], in order."""
    (alo, ahi), (blo, bhi) = span_a, span_b
    if (ahi - alo) + (bhi - blo) <= DIFFLIB_LINES:
        matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
        blocks.extend((alo + i, blo + j, n) for i, j, n in matcher.get_matching_blocks() if n)
        return
    anchors = _anchors(a, b, span_a, span_b)
    if not anchors:
        matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
        blocks.extend((alo + i, blo + j, n) for i, j, n in matcher.get_matching_blocks() if n)
        return
    i, j = alo, blo
    for anchor_a, anchor_b in anchors:
        _match(a, b, (i, anchor_a), (j, anchor_b), blocks)
        blocks.append((anchor_a, anchor_b, 1))
        i, j = anchor_a + 1, anchor_b + 1
    _match(a, b, (i, ahi), (j, bhi), blocks)


def _anchors(
    a: Sequence[str], b: Sequence[str], span_a: tuple[int, int], span_b: tuple[int, int]
) -> list[tuple[int, int]]:
    """The longest run, in order on both sides, of lines that occur once in each span."""
    (alo, ahi), (blo, bhi) = span_a, span_b
    count_a, count_b = Counter(a[alo:ahi]), Counter(b[blo:bhi])
    where_b = {b[j]: j for j in range(blo, bhi) if count_b[b[j]] == 1}
    pairs = [(i, where_b[a[i]]) for i in range(alo, ahi) if count_a[a[i]] == 1 and a[i] in where_b]
    return _increasing(pairs)


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of `pairs` (increasing first items) whose second items increase."""
    tails: list[int] = []  # tails[k]: the smallest second item ending a run of length k + 1
    ends: list[int] = []  # the index in `pairs` of that run's last pair
    before: list[int] = []
    for index, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            ends.append(index)
        else:
            tails[k], ends[k] = j, index
        before.append(ends[k - 1] if k else -1)
    run: list[tuple[int, int]] = []
    index = ends[-1] if ends else -1
    while index >= 0:
        run.append(pairs[index])
        index = before[index]
    return run[::-1]


def _merged(blocks: list[Block]) -> list[Block]:
    """Adjacent matching blocks joined, as SequenceMatcher.get_matching_blocks gives them."""
    out: list[Block] = []
    for i, j, n in blocks:
        if out and out[-1][0] + out[-1][2] == i and out[-1][1] + out[-1][2] == j and n:
            last = out[-1]
            out[-1] = (last[0], last[1], last[2] + n)
        else:
            out.append((i, j, n))
    return out

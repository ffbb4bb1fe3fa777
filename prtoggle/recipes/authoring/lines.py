"""Line numbers across a fix: which post-fix lines it added, where a pre-fix line went."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from prtoggle.recipes.authoring.diff import FileDiff


@dataclass(frozen=True)
class LineMap:
    """The lines of one file's diff: post-fix lines added, and pre-fix -> post-fix lines."""

    added: frozenset[int]
    removed: dict[int, int]
    """Each removed pre-fix line -> the post-fix line it sat before."""
    anchors: tuple[tuple[int, int], ...]
    """(pre-fix line, post-fix line) of every line on both sides that the diff shows."""
    post_count: int

    def first_added(self, first: int, last: int) -> int | None:
        """The first post-fix line in first..last that the fix added (None: none)."""
        return next((line for line in range(first, last + 1) if line in self.added), None)

    def post_of_pre(self, line: int) -> int:
        """The post-fix line where pre-fix line `line` is, or sat (removed lines)."""
        if line in self.removed:
            return self._clamp(self.removed[line])
        olds = [old for old, _ in self.anchors]
        index = bisect.bisect_right(olds, line) - 1
        if index < 0:
            return self._clamp(line)
        old, new = self.anchors[index]
        return self._clamp(new + line - old)

    def post_of_pre_span(self, first: int, last: int) -> int:
        """The post-fix line of the first removed line of pre-fix lines first..last."""
        removed = next((line for line in range(first, last + 1) if line in self.removed), first)
        return self.post_of_pre(removed)

    def _clamp(self, line: int) -> int:
        return max(1, min(line, max(self.post_count, 1)))


def line_map(diff: FileDiff, *, post_count: int) -> LineMap:
    """The LineMap of `diff`, whose post-fix file has `post_count` lines."""
    added = frozenset(line.new for line in diff.lines if line.kind == "+")
    removed = {line.old: line.new for line in diff.lines if line.kind == "-"}
    anchors = tuple((line.old, line.new) for line in diff.lines if line.kind == " ")
    return LineMap(added, removed, anchors, post_count)

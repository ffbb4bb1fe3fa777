"""Draft a revert recipe from a fix's diff: place each change in its function, or skip it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from prtoggle.patching.source_files import SourceTree
from prtoggle.patching.types import Edit
from prtoggle.recipes.authoring.diff import DiffLine, FileDiff, change_runs, parse_diff, undo
from prtoggle.recipes.authoring.edits import NoUniqueMatch, function_edits, same_code
from prtoggle.recipes.authoring.modules import find_module
from prtoggle.recipes.authoring.placement import (
    ADDED_WHOLE,
    DECORATORS,
    REMOVED_WHOLE,
    Layout,
    layout,
)

NOT_PYTHON = "not Python source"
NO_UNIQUE_MATCH = "no short match occurs exactly once in the function"


@dataclass(frozen=True)
class SkippedChange:
    """A change that cannot be reverted at run time: diff path, post-fix line, reason."""

    file: str
    line: int
    reason: str


@dataclass(frozen=True)
class DraftTarget:
    """One function to revert: its target, edits, the tree it is in, first changed line."""

    target: str
    edits: tuple[Edit, ...]
    tree: SourceTree
    file: str
    line: int


@dataclass
class Draft:
    """What a diff gives: the targets to revert and the changes skipped, in diff order."""

    files: list[str] = field(default_factory=list)
    targets: list[DraftTarget] = field(default_factory=list)
    skipped: list[SkippedChange] = field(default_factory=list)


def draft_from_diff(text: str, *, source: str, roots: Sequence[SourceTree]) -> Draft:
    """The Draft of diff `text` (named `source`) against post-fix code in `roots`."""
    draft = Draft()
    for diff in parse_diff(text, source=source):
        draft.files.append(diff.path)
        if not diff.path.endswith(".py"):
            first = next((line.new for line in diff.lines if line.kind != " "), 1)
            draft.skipped.append(SkippedChange(diff.path, first, NOT_PYTHON))
            continue
        _draft_file(diff, draft, source=source, roots=roots)
    return draft


def _draft_file(diff: FileDiff, draft: Draft, *, source: str, roots: Sequence[SourceTree]) -> None:
    if diff.deleted:
        new_text, module, tree = "", "", None
    else:
        found = find_module(diff.path, roots=roots, source=source)
        new_text, module, tree = found.file.text, found.module, found.tree
    old_text = undo(new_text, diff, source=source)
    new = layout(new_text, name=f"{diff.path} (post-fix)")
    old = layout(old_text, name=f"{diff.path} (pre-fix, the diff undone)")
    first_lines: dict[str, int] = {}
    for run in change_runs(diff):
        _place_run(run, diff.path, new, old, first_lines=first_lines, skipped=draft.skipped)
    for qualname, line in first_lines.items():
        new_lines = new.text(qualname)
        old_lines = _with_decorators_of(new, old, qualname)
        if same_code(new_lines, old_lines) or tree is None:
            continue
        try:
            edits = function_edits(new_lines, old_lines)
        except NoUniqueMatch:
            draft.skipped.append(SkippedChange(diff.path, line, NO_UNIQUE_MATCH))
            continue
        target = f"{module}.{qualname}"
        draft.targets.append(DraftTarget(target, tuple(edits), tree, diff.path, line))


def _place_run(
    run: list[DiffLine],
    path: str,
    new: Layout,
    old: Layout,
    *,
    first_lines: dict[str, int],
    skipped: list[SkippedChange],
) -> None:
    """Each non-blank line of a run goes to its function, or to a skipped change."""
    last_reason: str | None = None
    for line in run:
        if not line.text.strip():
            continue
        qualname, reason = _placement(line, new, old)
        if qualname is not None:
            first_lines.setdefault(qualname, line.new)
            last_reason = None
        elif reason != last_reason:
            change = SkippedChange(path, line.new, reason)
            if not skipped or skipped[-1] != change:
                skipped.append(change)
            last_reason = reason


def _placement(line: DiffLine, new: Layout, old: Layout) -> tuple[str | None, str]:
    region = new.region(line.new) if line.kind == "+" else old.region(line.old)
    if region.qualname is None:
        return None, region.kind
    if region.kind == DECORATORS:
        return None, DECORATORS
    other = old if line.kind == "+" else new
    if region.qualname not in other.functions:
        return None, ADDED_WHOLE if line.kind == "+" else REMOVED_WHOLE
    return region.qualname, ""


def _with_decorators_of(new: Layout, old: Layout, qualname: str) -> list[str]:
    """The pre-fix text of a function under its post-fix decorators (those are not edited)."""
    new_span, old_span = new.functions[qualname], old.functions[qualname]
    decorators = list(new.lines[new_span.first - 1 : new_span.def_line - 1])
    return [*decorators, *old.lines[old_span.def_line - 1 : old_span.last]]

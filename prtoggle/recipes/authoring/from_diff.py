"""Draft a whole-fix revert recipe from a diff: patches, names, and what is not reverted."""

from __future__ import annotations

import ast
import functools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from prtoggle.patching.define_code import define_bindings, define_imports
from prtoggle.patching.lines import split_lines
from prtoggle.patching.module_scope import imported_names as names_imported_by
from prtoggle.patching.source_files import SourceTree
from prtoggle.patching.types import Edit
from prtoggle.recipes.authoring.diff import DiffError, FileDiff, parse_diff, undo
from prtoggle.recipes.authoring.edits import NoUniqueMatch, function_edits
from prtoggle.recipes.authoring.guards import file_guards, in_package, is_test_path, test_text
from prtoggle.recipes.authoring.lines import LineMap, line_map
from prtoggle.recipes.authoring.modules import (
    ModuleFile,
    find_file,
    find_module,
    imported_names,
    safe_path,
    top_level_line,
)
from prtoggle.recipes.authoring.scopes import ModuleChanges, PatchCandidate, compare_module
from prtoggle.recipes.authoring.source_readers import source_readers
from prtoggle.recipes.authoring.stopping import stop_point
from prtoggle.recipes.names_schema import MODULE_REMOVED_REASON

NOT_PYTHON = "not Python source"
NOT_IN_ROOT = "not in the source root"
MODULE_ADDED = "a module added whole"
MODULE_REMOVED = MODULE_REMOVED_REASON
NO_UNIQUE_MATCH = "no short match occurs exactly once in the function"


@dataclass(frozen=True)
class SkippedChange:
    """A change `new` does not draft: diff path, post-fix line, reason (outside the source
    root, or code that never runs)."""

    file: str
    line: int
    reason: str


@dataclass(frozen=True)
class NotRevertedChange:
    """A change of the package that stays as the fix made it: the recipe's `not_reverted`.

    `file` is the path under the source root; `code` the post-fix line's stripped text.
    """

    file: str
    line: int
    reason: str
    code: str | None = None


@dataclass(frozen=True)
class DraftNames:
    """One `names` entry: its scope, the pre-fix statements to run, the names to delete."""

    scope: str
    define: str
    remove: tuple[str, ...]
    file: str
    line: int
    imported: frozenset[str] = frozenset()
    """Names a module scope's post-fix source binds by an import: copies of other
    modules' names, not its own (see `in_landing_order`)."""


@dataclass(frozen=True)
class DraftTarget:
    """One function to revert: its target, edits, the tree it is in, file and first
    changed line; `fallback` the pre-fix def to define in `scope` when its check fails."""

    target: str
    edits: tuple[Edit, ...]
    tree: SourceTree
    file: str
    line: int
    scope: str = ""
    fallback: str | None = None


@dataclass
class Draft:
    """What a diff gives, in diff order: targets, names, what stays, what was skipped, the
    tests the fix added or changed (`guards`), and the trees its modules were found in."""

    files: list[str] = field(default_factory=list)
    targets: list[DraftTarget] = field(default_factory=list)
    names: list[DraftNames] = field(default_factory=list)
    not_reverted: list[NotRevertedChange] = field(default_factory=list)
    skipped: list[SkippedChange] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    trees: list[SourceTree] = field(default_factory=list)
    modules: list[ModuleFile] = field(default_factory=list)
    added_modules: list[str] = field(default_factory=list)
    """Modules (and packages) the diff adds under the source root, test files aside."""
    first_change: tuple[str, int, str | None] | None = None
    """The first changed module's file (relative to its root), first changed line, its code."""


def draft_from_diff(text: str, *, source: str, roots: Sequence[SourceTree]) -> Draft:
    """The Draft of diff `text` (named `source`) against post-fix code in `roots`.

    Files outside the roots are skipped, never read. Test files (is_test_path, but not a
    module of a package in a root, like `sglang/test/...`) are never reverted: the tests
    they add or change become the draft's guards. Raises DiffError
    for a diff that cannot be read or that disagrees with the post-fix code.
    """
    draft = Draft()
    readers: list[tuple[str, str]] = []
    for diff in parse_diff(text, source=source):
        stop_point()  # drafted ahead by `bisect --git`: a draft no longer wanted stops here
        first = next((line.new for line in diff.lines if line.kind != " "), 1)
        safe = all(safe_path(path) for path in (diff.old_path, diff.new_path) if path)
        if safe and is_test_path(diff.path) and not in_package(diff.path, roots=roots):
            fresh = file_guards(diff, roots=roots)
            draft.guards.extend(guard for guard in fresh if guard not in draft.guards)
            readers += source_readers(fresh, test_text(diff, roots=roots))
            continue
        draft.files.append(diff.path)
        if not safe:
            draft.skipped.append(SkippedChange(diff.path, first, NOT_IN_ROOT))
        elif not diff.path.endswith(".py"):
            _draft_other_file(diff, draft, first=first, roots=roots)
        elif diff.deleted:
            _draft_removed_module(diff, draft, roots=roots)
        else:
            found = find_module(diff.path, roots=roots)
            if found is None:
                draft.skipped.append(SkippedChange(diff.path, first, NOT_IN_ROOT))
            else:
                _draft_module(diff, found, draft, source=source)
                draft.first_change = draft.first_change or _change_at(found, first)
    keep_imported_names(draft)
    _list_source_readers(readers, draft)
    return draft


_COMPARED: OrderedDict[tuple[object, ...], ModuleChanges] = OrderedDict()
"""compare_module's answers, by everything it reads: the suffixes `bisect --git` drafts
share most of their files' two sides. Process-global, the last 256 kept (a search
forgets them when it ends)."""


def forget_comparisons() -> None:
    """Forget every module comparison kept (_COMPARED)."""
    _COMPARED.clear()


def comparisons_kept() -> int:
    """How many module comparisons are kept now."""
    return len(_COMPARED)


def _list_source_readers(readers: Sequence[tuple[str, str]], draft: Draft) -> None:
    """List each guard that reads the package's source text, at the fix's first change:
    a revert at run time leaves every file's text as the fix wrote it."""
    if draft.first_change is None:
        return
    file, line, code = draft.first_change
    for guard, how in readers:
        reason = (
            f"{guard} reads the source text of the package's files ({how}): a revert at run "
            "time leaves the text of each file the fix changed as the fix wrote it"
        )
        draft.not_reverted.append(NotRevertedChange(file, line, reason, code))


def _change_at(found: ModuleFile, line: int) -> tuple[str, int, str | None]:
    """The module's file relative to its root, `line` and that line's stripped code."""
    lines = split_lines(found.file.text)
    code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return found.relative, line, code or None


def in_landing_order(names: Sequence[DraftNames]) -> list[DraftNames]:
    """`names` in the order the runtime can land them, else as given (diff order).

    Removing a name from the module that defines it also removes its copies (the names
    other modules bound by importing it), so a module's `remove` of its import of that name
    lands first, while it is still bound; a module's `define` that imports a name comes
    after the entry that defines it back where it lives.
    """
    after: dict[int, set[int]] = {index: set() for index in range(len(names))}
    for first, entry in enumerate(names):
        for then, other in enumerate(names):
            if first != then and _lands_before(entry, other):
                after[then].add(first)
    ordered: list[int] = []
    while len(ordered) < len(names):
        ready = [i for i in after if i not in ordered and not after[i] - set(ordered)]
        if not ready:  # a cycle: the rest as given
            ordered.extend(i for i in after if i not in ordered)
            break
        ordered.append(ready[0])
    return [names[index] for index in ordered]


def add_define(names: list[DraftNames], scope: str, text: str, *, file: str, line: int) -> None:
    """Add pre-fix statements `text` to `scope`'s entry of `names` (made if missing)."""
    for index, entry in enumerate(names):
        if entry.scope == scope:
            names[index] = replace(entry, define=entry.define + text, line=min(entry.line, line))
            return
    names.append(DraftNames(scope, text, (), file, line))


def _add_module(modules: list[str], module: str) -> None:
    """Add `module` unless a package above it is there; drop those under it."""
    if any(module == m or module.startswith(m + ".") for m in modules):
        return
    modules[:] = [m for m in modules if not m.startswith(module + ".")] + [module]


def _lands_before(entry: DraftNames, other: DraftNames) -> bool:
    """Whether `entry` must land before `other`: it removes its copy of a name `other`
    removes where it lives, or defines back a name that `other`'s define imports."""
    if set(entry.remove) & entry.imported & (set(other.remove) - other.imported):
        return True
    if not (entry.define.strip() and other.define.strip()):
        return False
    theirs = define_imports(other.define)
    return bool(theirs and theirs & (set(define_bindings(entry.define)) - entry.imported))


def _draft_other_file(
    diff: FileDiff, draft: Draft, *, first: int, roots: Sequence[SourceTree]
) -> None:
    found = find_file(diff.path, roots=roots) if not diff.deleted else None
    if found is None:
        draft.skipped.append(SkippedChange(diff.path, first, NOT_IN_ROOT))
        return
    path, relative = found
    lines = split_lines(path.read_text(encoding="utf-8", errors="replace"))
    code = lines[first - 1].strip() if first <= len(lines) else ""
    draft.not_reverted.append(NotRevertedChange(relative, first, NOT_PYTHON, code or None))


def keep_imported_names(draft: Draft) -> None:
    """A name the fix added to module M stays when another module the fix changed imports
    it from M (`from M import name`, anywhere in its post-fix text; a function the fix
    moved there, re-exported) and keeps that import reverted: removing it would make that
    import fail. Listed instead. When the importer's revert removes its import of the name
    too, both are removed: until the importer's own revert lands, the runtime lends it the
    name (revert/lent_names), so its post-fix import still works."""
    importers = [(found, imported_names(found)) for found in draft.modules]
    removed_by = {(e.scope, name) for e in draft.names for name in e.remove}
    for index, entry in enumerate(list(draft.names)):
        users: dict[str, str] = {}
        for name in entry.remove:
            for found, names in importers:
                if found.module == entry.scope or (entry.scope, name) not in names:
                    continue
                if (found.module, name) in removed_by:
                    continue  # the importer's import goes too: the runtime lends it the name
                users.setdefault(name, found.relative)
        if not users:
            continue
        kept = tuple(name for name in entry.remove if name not in users)
        draft.names[index] = replace(entry, remove=kept)
        owner = next((found for found in draft.modules if found.module == entry.scope), None)
        for name, user in users.items():
            place = top_level_line(owner, name) if owner is not None else None
            line, code = place or (entry.line, None)
            reason = (
                f"{name} added by the fix stays: {user} (changed by the same fix) imports it "
                f"from {entry.scope}, and removing it would fail that import"
            )
            draft.not_reverted.append(NotRevertedChange(entry.file, line, reason, code))
    draft.names[:] = [entry for entry in draft.names if entry.define or entry.remove]


def _draft_removed_module(diff: FileDiff, draft: Draft, *, roots: Sequence[SourceTree]) -> None:
    """A module the fix deleted: listed (it stays absent, reverted) under its path in the
    source root, found through the nearest `__init__.py` of its folders (a namespace
    package's folder has none); skipped when not in a root."""
    parts = diff.path.split("/")
    for depth in range(len(parts) - 1, 0, -1):
        package = find_file("/".join([*parts[:depth], "__init__.py"]), roots=roots)
        if package is None or not diff.path.endswith(".py"):
            continue
        folder = package[1].rpartition("/")[0]
        relative = "/".join([folder, *parts[depth:]]).lstrip("/")
        module = relative[: -len(".py")].replace("/", ".")
        reason = f"{MODULE_REMOVED} ({module} cannot be imported reverted)"
        draft.not_reverted.append(NotRevertedChange(relative, 1, reason))
        return
    draft.skipped.append(SkippedChange(diff.path, 1, NOT_IN_ROOT))


def _draft_module(diff: FileDiff, found: ModuleFile, draft: Draft, *, source: str) -> None:
    draft.modules.append(found)
    if all(found.tree is not tree for tree in draft.trees):
        draft.trees.append(found.tree)
    post = found.file.text
    lines = split_lines(post)
    if diff.added and not is_test_path(found.relative):
        _add_module(draft.added_modules, found.module)
        return
    if diff.added:
        first = next((n for n, text in enumerate(lines, 1) if text.strip()), 1)
        code = lines[first - 1].strip() if lines else None
        draft.not_reverted.append(NotRevertedChange(found.relative, first, MODULE_ADDED, code))
        return
    pre = undo(post, diff, source=source)
    try:
        changes = _compared(
            pre, post, module=found.module, lines=line_map(diff, post_count=len(lines))
        )
    except SyntaxError as exc:
        side = "post-fix" if exc.text is not None and exc.text in post else "pre-fix"
        raise DiffError(
            f"{source}: {diff.path}:{exc.lineno}: the {side} text does not parse ({exc.msg}); "
            "expected Python source"
        ) from exc
    _add_changes(changes, found, draft, diff=diff)


def _add_changes(
    changes: ModuleChanges, found: ModuleFile, draft: Draft, *, diff: FileDiff
) -> None:
    imported = _imported_by_text(found.file.text)
    for entry in changes.names.values():
        define = entry.define_text()
        remove = tuple(entry.remove)
        own = imported if entry.scope == found.module else frozenset()
        draft.names.append(
            DraftNames(entry.scope, define, remove, found.relative, entry.line, imported=own)
        )
    for candidate in changes.patches:
        _add_target(candidate, found, draft)
    for listed in changes.listed:
        change = NotRevertedChange(found.relative, listed.line, listed.reason, listed.code)
        draft.not_reverted.append(change)
    for inert in changes.inert:
        draft.skipped.append(SkippedChange(diff.path, inert.line, inert.reason))


def _add_target(candidate: PatchCandidate, found: ModuleFile, draft: Draft) -> None:
    scope = found.module + "".join(f".{part}" for part in candidate.qualname.split(".")[:-1])
    try:
        edits = function_edits(candidate.new, candidate.old)
    except NoUniqueMatch:
        if candidate.fallback is not None:
            add_define(
                draft.names, scope, candidate.fallback, file=found.relative, line=candidate.line
            )
        else:
            change = NotRevertedChange(found.relative, candidate.line, NO_UNIQUE_MATCH)
            draft.not_reverted.append(change)
        return
    target = f"{found.module}.{candidate.qualname}"
    draft.targets.append(
        DraftTarget(
            target,
            tuple(edits),
            found.tree,
            found.relative,
            candidate.line,
            scope=scope,
            fallback=candidate.fallback,
        )
    )


@functools.lru_cache(maxsize=256)
def _imported_by_text(text: str) -> frozenset[str]:
    """The names a module text's imports bind in its scope (parsed once per text)."""
    return names_imported_by(ast.parse(text))


def _compared(pre: str, post: str, *, module: str, lines: LineMap) -> ModuleChanges:
    """compare_module, answered once per (pre, post, module, lines); read-only answers."""
    removed = tuple(sorted(lines.removed.items()))
    key = (module, pre, post, lines.added, removed, lines.anchors, lines.post_count)
    found = _COMPARED.get(key)
    if found is None:
        found = _COMPARED[key] = compare_module(pre, post, module=module, lines=lines)
        if len(_COMPARED) > 256:
            _COMPARED.popitem(last=False)
    _COMPARED.move_to_end(key)
    return found

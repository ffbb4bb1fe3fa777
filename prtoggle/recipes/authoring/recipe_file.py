"""Render a drafted recipe as YAML, keeping what checks ok on its trees, and write it atomically."""

from __future__ import annotations

import ast
import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from prtoggle.errors import RegistryError
from prtoggle.patching.define_code import define_bindings, parse_define
from prtoggle.patching.source_files import SourceTree
from prtoggle.patching.types import Edit
from prtoggle.recipes.authoring.from_diff import (
    Draft,
    DraftNames,
    DraftTarget,
    NotRevertedChange,
    add_define,
    in_landing_order,
)
from prtoggle.recipes.authoring.missing_imports import ModuleKnown, without_missing_imports
from prtoggle.recipes.authoring.stopping import stop_point
from prtoggle.recipes.check import TargetCheck, check_recipe
from prtoggle.recipes.file_writing import replace_atomically, unsafe_destination
from prtoggle.recipes.names_check import WholeFixCheck, check_whole_fix, unresolved_patch_reads
from prtoggle.recipes.schema import Recipe, load_recipe_text

_CHECK_PREFIX = re.compile(r"^.*?\.yaml:\d+: PR \d+: \S+ \([^)]*\): ")


class RecipeWriteError(RegistryError):
    """A recipe file cannot be written where it was asked for; nothing was written."""


@dataclass(frozen=True)
class RecipeHeader:
    """The metadata a new recipe starts with."""

    pr: int
    title: str
    url: str | None = None
    merged: datetime.date | None = None


@dataclass(frozen=True)
class CheckedRecipe:
    """A draft once checked: the recipe text, and the targets, names and list it holds."""

    text: str
    targets: tuple[DraftTarget, ...]
    names: tuple[DraftNames, ...]
    not_reverted: tuple[NotRevertedChange, ...]


def render_recipe(
    header: RecipeHeader,
    targets: Sequence[tuple[str, Sequence[Edit]]],
    *,
    names: Sequence[DraftNames] = (),
    not_reverted: Sequence[NotRevertedChange] = (),
    guards: Sequence[str] = (),
    added_modules: Sequence[str] = (),
) -> str:
    """The YAML text of a recipe: header keys, `patches`, `names`, `not_reverted` and
    `guards` (each only when not empty), code as block literals."""
    document: dict[str, Any] = {"pr": header.pr, "title": header.title}
    if header.url:
        document["url"] = header.url
    if header.merged is not None:
        document["merged"] = header.merged
    if targets:
        document["patches"] = [
            {"target": target, "edits": [_edit_mapping(edit) for edit in edits]}
            for target, edits in targets
        ]
    if names:
        document["names"] = [_names_mapping(entry) for entry in names]
    if added_modules:
        document["added_modules"] = list(added_modules)
    if not_reverted:
        document["not_reverted"] = [_not_reverted_mapping(change) for change in not_reverted]
    if guards:
        document["guards"] = list(guards)
    return render_patches(document)


def render_patches(document: dict[str, Any]) -> str:
    """A recipe mapping as YAML, keys in their order, code as `|` block literals."""
    return yaml.dump(document, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True)


def checked_recipe(
    header: RecipeHeader,
    draft: Draft,
    *,
    path: Path,
    roots: Sequence[SourceTree],
    has_module: ModuleKnown | None = None,
) -> CheckedRecipe:
    """The recipe of a draft, its targets checked first (as `check` does, on the tree each
    is in). A target that does not check is defined whole instead when its pre-fix def
    can be (`fallback`), else listed as not reverted; then each `names` entry is checked
    on the trees of `roots`, and one that does not check is listed as not reverted.
    `has_module`: whether the installed package has a module; a define's import of one it
    lacks is left out and listed (missing_imports.py).

    The text is checked as the file `path` it is going to be (messages name that file).
    """
    stop_point()  # drafted ahead by `bisect --git`: a draft no longer wanted stops here
    kept, failed = _checked_targets(header, draft.targets, path=path)
    names = list(draft.names)
    not_reverted = list(draft.not_reverted)
    for target, reason in failed:
        if target.fallback is not None:
            add_define(names, target.scope, target.fallback, file=target.file, line=target.line)
        else:
            not_reverted.append(NotRevertedChange(target.file, target.line, reason))
    names = in_landing_order(names)
    if has_module is not None:
        names = without_missing_imports(names, not_reverted, has_module=has_module)
    names, not_reverted = _checked_names(
        header, names, not_reverted, path=path, roots=[*roots, *draft.trees, *_trees(kept)]
    )
    stop_point()
    kept = _reads_resolved(header, kept, names, not_reverted, path=path)
    text = render_recipe(
        header,
        [(t.target, t.edits) for t in kept],
        names=names,
        not_reverted=not_reverted,
        guards=draft.guards,
        added_modules=draft.added_modules,
    )
    return CheckedRecipe(text, tuple(kept), tuple(names), tuple(not_reverted))


def recipe_destination(out: Path, pr: int) -> Path:
    """OUT/<pr>.yaml, once it is known writable; nothing is created.

    Refused with a RecipeWriteError naming it: OUT that exists and is not a directory, and
    a destination that is a symbolic link (never written through) or not a regular file
    (a FIFO is never opened). `new` calls it before its work, write_recipe again to write.
    """
    if out.exists() and not out.is_dir():
        raise RecipeWriteError(f"--out {out}: not a directory; expected a directory for <PR>.yaml")
    path = out / f"{pr}.yaml"
    _refuse_destination(path)
    return path


def write_recipe(text: str, *, out: Path, pr: int) -> Path:
    """Write `text` as OUT/<pr>.yaml, atomically (OUT created if missing); the path written.

    The text goes to a temporary file in OUT, flushed to disk, then renamed over the
    destination: a reader sees the old file or the new one, never a part of either, and
    an error or an interruption leaves the old file as it was (the temporary removed).
    The mode is the old file's, else what the umask gives a new file. Refusals and write
    errors are a RecipeWriteError naming the file.
    """
    path = recipe_destination(out, pr)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecipeWriteError(
            f"--out {out}: cannot create the directory: {exc.strerror or exc}"
        ) from exc
    try:
        replace_atomically(path, text.encode("utf-8"))
    except OSError as exc:
        raise RecipeWriteError(
            f"{path}: cannot write the recipe: {exc.strerror or exc}; nothing written "
            "(a file already there is unchanged)"
        ) from exc
    return path


def _checked_targets(
    header: RecipeHeader, targets: Sequence[DraftTarget], *, path: Path
) -> tuple[list[DraftTarget], list[tuple[DraftTarget, str]]]:
    """The targets that check ok, and each other one with the reason it does not."""
    kept = list(targets)
    failed: list[tuple[DraftTarget, str]] = []
    while kept:
        text = render_recipe(header, [(t.target, t.edits) for t in kept])
        bad = _failing(text, path, kept)
        if not bad:
            break
        for target, check in bad:
            reason = f"the revert does not check ({check.status}: {_why(check.message)})"
            failed.append((target, reason))
        names = {target.target for target, _ in bad}
        kept = [t for t in kept if t.target not in names]
    return kept, failed


def _checked_names(
    header: RecipeHeader,
    names: list[DraftNames],
    not_reverted: list[NotRevertedChange],
    *,
    path: Path,
    roots: Sequence[SourceTree],
) -> tuple[list[DraftNames], list[NotRevertedChange]]:
    """The `names` entries that check on the trees of `roots` (as `check --source-root`
    does); each other one is listed as not reverted, at its file and line, with the reason.

    An entry checks when some tree holds its scope's package and no such tree refuses it.
    One refused because its `define` reads a global nothing defines after the revert keeps
    its other statements: those reading that global are dropped and listed, by the names
    they bind. What is dropped can leave another entry's read undefined, so the entries
    kept are checked again until none is refused.
    """
    kept = list(names)
    while kept:
        stop_point()
        verdicts = _names_verdicts(header, kept, path=path, roots=roots)
        if all(verdict and all(v.status == "ok" for v in verdict) for verdict in verdicts):
            break
        again = [_rechecked(e, v, not_reverted) for e, v in zip(kept, verdicts, strict=True)]
        kept = [entry for entry in again if entry is not None]
    return kept, not_reverted


def _rechecked(
    entry: DraftNames, verdict: list[WholeFixCheck], not_reverted: list[NotRevertedChange]
) -> DraftNames | None:
    """`entry` when its checks all pass; else what of it is left to check again (None:
    nothing), each part dropped listed in `not_reverted` with its reason."""
    refused = [found for found in verdict if found.status != "ok"]
    if verdict and not refused:
        return entry
    if not refused:
        reason = f"the revert does not check (absent: no tree holds {entry.scope})"
        not_reverted.append(NotRevertedChange(entry.file, entry.line, reason))
        return None
    smaller = _without_readers(entry, refused[0].unresolved)
    if smaller is None:
        reason = f"the revert does not check ({refused[0].status}: {_why(refused[0].message)})"
        not_reverted.append(NotRevertedChange(entry.file, entry.line, reason))
        return None
    left, reason = smaller
    not_reverted.append(NotRevertedChange(entry.file, entry.line, reason))
    return left if left.define or left.remove else None


def _names_verdicts(
    header: RecipeHeader, names: list[DraftNames], *, path: Path, roots: Sequence[SourceTree]
) -> list[list[WholeFixCheck]]:
    """Each entry's checks on the trees of `roots` that hold its scope's package."""
    text = render_recipe(header, [], names=names)
    recipe = load_recipe_text(text, path=path, collection="new")
    verdicts: list[list[WholeFixCheck]] = [[] for _ in names]
    for tree in _unique(roots):
        for index, found in enumerate(check_whole_fix(recipe, tree=tree)[: len(names)]):
            if found.status != "absent":
                verdicts[index].append(found)
    return verdicts


def _without_readers(entry: DraftNames, name: str) -> tuple[DraftNames, str] | None:
    """`entry` less the top-level statements of its define that read global `name`, and
    the reason they are listed; None when no statement can be told to read it."""
    if not name or not entry.define.strip():
        return None
    lines = entry.define.splitlines(keepends=True)
    dropped: set[int] = set()
    bound: list[str] = []
    for node in parse_define(entry.define).body:
        if not any(
            isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
            for n in ast.walk(node)
        ):
            continue
        decorators = getattr(node, "decorator_list", [])
        first = min([node.lineno, *(d.lineno for d in decorators)])
        dropped.update(range(first - 1, node.end_lineno or node.lineno))
        text = "".join(lines[first - 1 : node.end_lineno])
        bound.extend(define_bindings(text))
    if not dropped:
        return None
    define = "".join(line for index, line in enumerate(lines) if index not in dropped)
    what = ", ".join(f"`{entry.scope}.{b}`" for b in bound) or f"a statement of {entry.scope}"
    reason = (
        f"{what} not defined back: its pre-fix code reads `{name}`, "
        "which the revert does not define"
    )
    return replace(entry, define=define if define.strip() else ""), reason


def _reads_resolved(
    header: RecipeHeader,
    targets: list[DraftTarget],
    names: Sequence[DraftNames],
    not_reverted: list[NotRevertedChange],
    *,
    path: Path,
) -> list[DraftTarget]:
    """The targets whose reverted code reads only names its module binds after the kept
    `names` (a names entry listed as not checking can leave a global the pre-fix code reads
    undefined); each other one is listed: the run-time global check would refuse it."""
    if not targets:
        return targets
    text = render_recipe(header, [(t.target, t.edits) for t in targets], names=names)
    recipe = load_recipe_text(text, path=path, collection="new")
    problems: dict[str, str] = {}
    for tree in _trees(targets):
        problems.update(unresolved_patch_reads(recipe, tree=tree))
    for target in targets:
        if target.target in problems:
            reason = f"the revert does not check (error: {problems[target.target]})"
            not_reverted.append(NotRevertedChange(target.file, target.line, reason))
    return [t for t in targets if t.target not in problems]


def _failing(
    text: str, path: Path, targets: Sequence[DraftTarget]
) -> list[tuple[DraftTarget, TargetCheck]]:
    recipe = load_recipe_text(text, path=path, collection="new")
    bad = []
    for tree in _trees(targets):
        mine = {t.target for t in targets if t.tree is tree}
        subset = replace(recipe, patches=tuple(p for p in recipe.patches if p.target in mine))
        bad.extend(_bad_checks(subset, tree, targets))
    return bad


def _bad_checks(
    recipe: Recipe, tree: SourceTree, targets: Sequence[DraftTarget]
) -> list[tuple[DraftTarget, TargetCheck]]:
    by_name = {t.target: t for t in targets}
    return [(by_name[c.target], c) for c in check_recipe(recipe, tree=tree) if not c.ok]


def _trees(targets: Sequence[DraftTarget]) -> list[SourceTree]:
    return _unique([target.tree for target in targets])


def _unique(trees: Sequence[SourceTree]) -> list[SourceTree]:
    """`trees` without repeats (by identity), in order."""
    seen: list[SourceTree] = []
    for tree in trees:
        if all(tree is not other for other in seen):
            seen.append(tree)
    return seen


def _why(message: str) -> str:
    """A check message's first line without the scratch recipe's path and the target."""
    first = message.splitlines()[0] if message else ""
    return _CHECK_PREFIX.sub("", first)


def _edit_mapping(edit: Edit) -> dict[str, str]:
    return {"match": edit.match, edit.kind: edit.text}


def _names_mapping(entry: DraftNames) -> dict[str, Any]:
    mapping: dict[str, Any] = {"scope": entry.scope}
    if entry.define:
        mapping["define"] = entry.define
    if entry.remove:
        mapping["remove"] = list(entry.remove)
    return mapping


def _not_reverted_mapping(change: NotRevertedChange) -> dict[str, Any]:
    mapping: dict[str, Any] = {"file": change.file, "line": change.line}
    if change.code:
        mapping["code"] = change.code
    mapping["reason"] = change.reason
    return mapping


def _refuse_destination(path: Path) -> None:
    try:
        reason = unsafe_destination(path)
    except OSError as exc:
        raise RecipeWriteError(f"{path}: cannot write the recipe: {exc.strerror or exc}") from exc
    if reason is not None:
        raise RecipeWriteError(f"{path}: {reason}; remove it or choose another --out")


_FAST_SAFE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's emitter where PyYAML was built with it (the same text, a fraction of the time)."""


class _BlockDumper(_FAST_SAFE_DUMPER):  # type: ignore[valid-type,misc]
    """Multi-line strings as `|` block literals, as a person writes code in YAML."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)

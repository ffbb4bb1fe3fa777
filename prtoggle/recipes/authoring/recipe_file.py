"""Render a drafted recipe as YAML, keeping only what checks ok on the trees its targets are in."""

from __future__ import annotations

import datetime
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from prtoggle.patching.source_files import SourceTree
from prtoggle.patching.types import Edit
from prtoggle.recipes.authoring.from_diff import (
    Draft,
    DraftNames,
    DraftTarget,
    NotRevertedChange,
    add_define,
)
from prtoggle.recipes.check import TargetCheck, check_fix
from prtoggle.recipes.schema import Recipe, load_recipe

_CHECK_PREFIX = re.compile(r"^\S+\.yaml:\d+: PR \d+: \S+ \([^)]*\): ")


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
) -> str:
    """The YAML text of a recipe: header keys, `patches`, `names` and `not_reverted` (each
    only when not empty), code as block literals."""
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
    if not_reverted:
        document["not_reverted"] = [_not_reverted_mapping(change) for change in not_reverted]
    return render_patches(document)


def render_patches(document: dict[str, Any]) -> str:
    """A recipe mapping as YAML, keys in their order, code as `|` block literals."""
    return yaml.dump(document, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True)


def checked_recipe(header: RecipeHeader, draft: Draft) -> CheckedRecipe:
    """The recipe of a draft, its targets checked first (as `check` does, on the tree each
    is in). A target that does not check is defined whole instead when its pre-fix def
    can be (`fallback`), else listed as not reverted; then the `names` hook."""
    kept, failed = _checked_targets(header, draft.targets)
    names = list(draft.names)
    not_reverted = list(draft.not_reverted)
    for target, reason in failed:
        if target.fallback is not None:
            add_define(names, target.scope, target.fallback, file=target.file, line=target.line)
        else:
            not_reverted.append(NotRevertedChange(target.file, target.line, reason))
    names, not_reverted = _checked_names(names, not_reverted, draft)
    text = render_recipe(
        header, [(t.target, t.edits) for t in kept], names=names, not_reverted=not_reverted
    )
    return CheckedRecipe(text, tuple(kept), tuple(names), tuple(not_reverted))


def write_recipe(text: str, *, out: Path, pr: int) -> Path:
    """Write `text` to OUT/<pr>.yaml (OUT created if missing); the path written."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{pr}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _checked_targets(
    header: RecipeHeader, targets: Sequence[DraftTarget]
) -> tuple[list[DraftTarget], list[tuple[DraftTarget, str]]]:
    """The targets that check ok, and each other one with the reason it does not."""
    kept = list(targets)
    failed: list[tuple[DraftTarget, str]] = []
    while kept:
        text = render_recipe(header, [(t.target, t.edits) for t in kept])
        bad = _failing(text, header.pr, kept)
        if not bad:
            break
        for target, check in bad:
            reason = f"the revert does not check ({check.status}: {_why(check.message)})"
            failed.append((target, reason))
        names = {target.target for target, _ in bad}
        kept = [t for t in kept if t.target not in names]
    return kept, failed


def _checked_names(
    names: list[DraftNames], not_reverted: list[NotRevertedChange], draft: Draft
) -> tuple[list[DraftNames], list[NotRevertedChange]]:
    """HOOK (issue 27, the runtime half): the static check of `names` and `not_reverted`.

    At the merge with the runtime's `check` of these keys, check each names entry on the
    tree its scope is in, and move an entry that does not check to `not_reverted` (its
    file and line, reason "the revert does not check (...)"), as `_checked_targets` does
    for patches. Until then the loader of this branch does not know the keys, so the
    entries are written as drafted (their statements are those the spec allows).
    """
    del draft
    return names, not_reverted


def _failing(
    text: str, pr: int, targets: Sequence[DraftTarget]
) -> list[tuple[DraftTarget, TargetCheck]]:
    with tempfile.TemporaryDirectory(prefix="prtoggle-new-") as scratch:
        path = Path(scratch) / f"{pr}.yaml"
        path.write_text(text, encoding="utf-8")
        recipe = load_recipe(path, collection="new")
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
    return [(by_name[c.target], c) for c in check_fix(recipe, tree=tree) if not c.ok]


def _trees(targets: Sequence[DraftTarget]) -> list[SourceTree]:
    trees: list[SourceTree] = []
    for target in targets:
        if all(target.tree is not tree for tree in trees):
            trees.append(target.tree)
    return trees


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


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as `|` block literals, as a person writes code in YAML."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)

"""Write a drafted recipe as YAML, only once it checks ok on the trees its targets are in."""

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
from prtoggle.recipes.authoring.from_diff import DraftTarget, SkippedChange
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


def render_recipe(header: RecipeHeader, targets: Sequence[tuple[str, Sequence[Edit]]]) -> str:
    """The YAML text of a recipe: header keys, then `patches` with block-literal code."""
    document: dict[str, Any] = {"pr": header.pr, "title": header.title}
    if header.url:
        document["url"] = header.url
    if header.merged is not None:
        document["merged"] = header.merged
    document["patches"] = [
        {"target": target, "edits": [_edit_mapping(edit) for edit in edits]}
        for target, edits in targets
    ]
    return render_patches(document)


def render_patches(document: dict[str, Any]) -> str:
    """A recipe mapping as YAML, keys in their order, code as `|` block literals."""
    return yaml.dump(document, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True)


def checked_recipe(
    header: RecipeHeader, targets: Sequence[DraftTarget]
) -> tuple[str, list[DraftTarget], list[SkippedChange]]:
    """The recipe text of the targets that check ok; the others become skipped changes."""
    kept = list(targets)
    failed: list[SkippedChange] = []
    while kept:
        text = render_recipe(header, [(t.target, t.edits) for t in kept])
        bad = _failing(text, header.pr, kept)
        if not bad:
            return text, kept, failed
        for target, check in bad:
            reason = f"the revert does not check ({check.status}: {_why(check.message)})"
            failed.append(SkippedChange(target.file, target.line, reason))
        names = {target.target for target, _ in bad}
        kept = [t for t in kept if t.target not in names]
    return "", [], failed


def write_recipe(text: str, *, out: Path, pr: int) -> Path:
    """Write `text` to OUT/<pr>.yaml (OUT created if missing); the path written."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{pr}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


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


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as `|` block literals, as a person writes code in YAML."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)

"""Rebase a stale recipe: moved targets found by their bodies, drifted edits re-anchored."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from prtoggle.errors import TargetResolutionError
from prtoggle.patching.editor import edit_text, edits_apply
from prtoggle.patching.source_files import SourceTree
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.patching.types import Edit, Patch
from prtoggle.recipes.authoring.moved import find_moved
from prtoggle.recipes.authoring.reanchor import reanchor
from prtoggle.recipes.authoring.recipe_file import render_patches, write_recipe
from prtoggle.recipes.check import check_fix
from prtoggle.recipes.schema import Recipe, load_recipe


@dataclass(frozen=True)
class EditStatus:
    """One edit's outcome: exact, re-anchored, moved or not-found, and a similarity in 0..1."""

    target: str
    old_target: str
    status: str
    similarity: float


@dataclass
class Rebase:
    """A recipe rebased onto a tree: `status` unchanged, rebased or failed."""

    recipe: Recipe
    status: str = "failed"
    edits: list[EditStatus] = field(default_factory=list)
    path: Path | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)


def rebase_recipe(recipe: Recipe, *, tree: SourceTree, out: Path) -> Rebase:
    """Propose `recipe` updated for `tree`; write OUT/<PR>.yaml only if it checks ok."""
    result = Rebase(recipe)
    patches = []
    for patch in recipe.patches:
        rebased = _rebase_patch(patch, tree=tree, result=result)
        if rebased is not None:
            patches.append(rebased)
    blocking = [e for e in result.edits if e.status == "not-found"]
    if blocking:
        result.reason = "; ".join(
            [
                "no unambiguous place for "
                + ", ".join(f"an edit of {e.old_target}" for e in blocking),
                *result.notes,
            ]
        )
        return result
    if all(e.status == "exact" for e in result.edits):
        result.status = "unchanged"
        return result
    text = _rewritten(recipe, patches)
    problem = _check_problem(text, recipe, tree)
    if problem:
        result.reason = f"the rebased recipe does not check: {problem}"
        return result
    result.path = write_recipe(text, out=out, pr=recipe.pr)
    result.status = "rebased"
    return result


def _rebase_patch(patch: Patch, *, tree: SourceTree, result: Rebase) -> Patch | None:
    """The patch with its target and edits updated (statuses added to `result`), or None."""
    statuses, target, moved = result.edits, patch.target, False
    try:
        text = find_in_source_tree(target, source_root=tree).text
    except TargetResolutionError:
        found = find_moved(patch, tree)
        if found.found is None:
            missing = EditStatus(target, target, "not-found", round(found.similarity, 3))
            statuses.extend(missing for _ in patch.edits)
            if found.reason:
                result.notes.append(f"{target}: {found.reason}")
            return None
        target, text = found.found.target, found.found.text
        moved = True
    edits = []
    for edit in patch.edits:
        status, similarity, new = _rebase_edit(text, edit)
        if moved and status != "not-found":
            status = "moved"
        statuses.append(EditStatus(target, patch.target, status, round(similarity, 3)))
        if new is None:
            return None
        edits.append(new)
        text = edit_text(source=text, edits=[new])
    return Patch(target=target, edits=tuple(edits), line=patch.line, preamble=patch.preamble)


def _rebase_edit(text: str, edit: Edit) -> tuple[str, float, Edit | None]:
    if edits_apply(source=text, edits=[edit]):
        return "exact", 1.0, edit
    anchored = reanchor(text, edit)
    if anchored.edit is None:
        return "not-found", anchored.similarity, None
    return "re-anchored", anchored.similarity, anchored.edit


def _rewritten(recipe: Recipe, patches: list[Patch]) -> str:
    """The recipe file with its `patches` replaced (other keys kept, in their order)."""
    document: dict[str, Any] = yaml.safe_load(Path(recipe.path).read_text(encoding="utf-8"))
    document.setdefault("pr", recipe.pr)
    document["patches"] = [
        {
            "target": patch.target,
            **({"preamble": patch.preamble} if patch.preamble else {}),
            "edits": [{"match": e.match, e.kind: e.text} for e in patch.edits],
        }
        for patch in patches
    ]
    return render_patches(document)


def _check_problem(text: str, recipe: Recipe, tree: SourceTree) -> str:
    with tempfile.TemporaryDirectory(prefix="prtoggle-rebase-") as scratch:
        path = Path(scratch) / f"{recipe.pr}.yaml"
        path.write_text(text, encoding="utf-8")
        candidate = load_recipe(path, collection=recipe.collection)
        bad = [c for c in check_fix(candidate, tree=tree) if c.status not in ("ok",)]
    return "; ".join(f"{c.target}: {c.status}" for c in bad)

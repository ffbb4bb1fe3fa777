"""Rebase a stale recipe: moved targets found by their bodies, drifted edits re-anchored."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prtoggle.commands.selections import load_default_registry
from prtoggle.errors import RegistryError, TargetResolutionError
from prtoggle.patching.editor import edit_text, edits_apply
from prtoggle.patching.source_files import SourceTree, open_source_tree
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.patching.types import Edit, Patch
from prtoggle.recipes.authoring.moved import find_moved
from prtoggle.recipes.authoring.reanchor import reanchor
from prtoggle.recipes.authoring.recipe_file import write_recipe
from prtoggle.recipes.authoring.yaml_edits import rewrite_patches
from prtoggle.recipes.check import check_recipe
from prtoggle.recipes.from_sglang import read_recipes, recipe_file_text
from prtoggle.recipes.resolution import import_free_source_root
from prtoggle.recipes.schema import Recipe, load_recipe_text
from prtoggle.recipes.yaml_reading import read_recipe_text

_GONE = (
    "the target is gone and no function of its package holds its edits closely enough "
    "to be the one it moved to"
)


@dataclass(frozen=True)
class EditStatus:
    """One edit's outcome: exact, re-anchored, moved or not-found, a similarity in 0..1 and,
    for not-found, why."""

    target: str
    old_target: str
    status: str
    similarity: float
    reason: str = ""


@dataclass
class Rebase:
    """A recipe rebased onto a tree: `status` unchanged, rebased or failed."""

    recipe: Recipe
    status: str = "failed"
    edits: list[EditStatus] = field(default_factory=list)
    path: Path | None = None
    reason: str = ""


def rebase_prs(
    prs: Sequence[int], *, collection: str | None, source_root: Path | None, out: Path
) -> Iterator[Rebase]:
    """Rebase the recipe of each PR (in `collection`) onto `source_root`, else onto the
    installed package of its targets (none installed: an error asking for a source root).

    Every recipe and its code are found when this is called, before any is rebased (a bad
    PR: the error, nothing written); the recipes are then rebased one by one as the
    iterator is read. Recipes whose code lies in one place share one tree: its files are
    listed, and the package searches for moved targets made, once for all of them.
    """
    registry = load_default_registry(collection=collection)
    recipes = [registry.get(pr, collection=collection) for pr in dict.fromkeys(prs)]
    trees: dict[Path, SourceTree] = {}
    planned = []
    for recipe in recipes:
        root = source_root or import_free_source_root(recipe)
        if root is None:
            raise TargetResolutionError(
                f"PR {recipe.pr}: the package of its targets is not installed; expected "
                "--source-root (a directory, wheel or sdist)"
            )
        if root not in trees:
            trees[root] = open_source_tree(root)
        planned.append((recipe, trees[root]))
    return (rebase_recipe(recipe, tree=tree, out=out) for recipe, tree in planned)


def rebase_recipe(recipe: Recipe, *, tree: SourceTree, out: Path) -> Rebase:
    """Propose `recipe` updated for `tree`; write OUT/<PR>.yaml only if it checks ok."""
    result = Rebase(recipe)
    patches = []
    for patch in recipe.patches:
        rebased = _rebase_patch(patch, tree=tree, result=result)
        if rebased is not None:
            patches.append(rebased)
    if any(e.status == "not-found" for e in result.edits):
        result.reason = _blocking_reasons(result.edits)
        return result
    if all(e.status == "exact" for e in result.edits):
        result.status = "unchanged"
        return result
    destination = out / f"{recipe.pr}.yaml"
    text = rewrite_patches(
        _recipe_text(recipe), old=recipe.patches, new=patches, name=str(recipe.path)
    )
    problem = _check_problem(text, recipe, tree, destination=destination, patches=patches)
    if problem:
        result.reason = f"the rebased recipe for {destination} (not written) {problem}"
        return result
    result.path = write_recipe(text, out=out, pr=recipe.pr)
    result.status = "rebased"
    return result


def _blocking_reasons(edits: list[EditStatus]) -> str:
    """Each not-found edit's reason once: `no unambiguous place for edits 1 and 2 (T): R`."""
    grouped: dict[tuple[str, str], list[int]] = {}
    for index, edit in enumerate(edits, start=1):
        if edit.status == "not-found":
            grouped.setdefault((edit.old_target, edit.reason), []).append(index)
    parts = []
    for (target, reason), indices in grouped.items():
        numbers = [str(i) for i in indices]
        which = numbers[0] if len(numbers) == 1 else f"{', '.join(numbers[:-1])} and {numbers[-1]}"
        parts.append(
            f"no unambiguous place for edit{'s' if len(numbers) > 1 else ''} {which} "
            f"({target}): {reason}"
        )
    return "; ".join(parts)


def _rebase_patch(patch: Patch, *, tree: SourceTree, result: Rebase) -> Patch | None:
    """The patch with its target and edits updated (statuses added to `result`), or None."""
    statuses, target, moved = result.edits, patch.target, False
    try:
        text = find_in_source_tree(target, source_root=tree).text
    except TargetResolutionError:
        found = find_moved(patch, tree)
        if found.found is None:
            why = found.reason or _GONE
            missing = EditStatus(target, target, "not-found", round(found.similarity, 3), why)
            statuses.extend(missing for _ in patch.edits)
            return None
        target, text = found.found.target, found.found.text
        moved = True
    edits = []
    for edit in patch.edits:
        status, similarity, new, reason = _rebase_edit(text, edit)
        if moved and status != "not-found":
            status = "moved"
        statuses.append(EditStatus(target, patch.target, status, round(similarity, 3), reason))
        if new is None:
            return None
        edits.append(new)
        text = edit_text(source=text, edits=[new])
    return Patch(target=target, edits=tuple(edits), line=patch.line, preamble=patch.preamble)


def _rebase_edit(text: str, edit: Edit) -> tuple[str, float, Edit | None, str]:
    if edits_apply(source=text, edits=[edit]):
        return "exact", 1.0, edit, ""
    anchored = reanchor(text, edit)
    if anchored.edit is None:
        return "not-found", anchored.similarity, None, anchored.reason
    return "re-anchored", anchored.similarity, anchored.edit, ""


def _recipe_text(recipe: Recipe) -> str:
    """The text of the recipe's file, read as the registry reads it; sglang's built-in
    recipes (held in a Python module) as `import-sglang` writes them."""
    if recipe.path.suffix in (".yaml", ".yml"):
        return read_recipe_text(recipe.path)
    for found in read_recipes(recipe.path):
        if found.pr == recipe.pr:
            return recipe_file_text(found)
    raise RegistryError(f"{recipe.path}: no recipe of PR {recipe.pr} to rebase")


def _check_problem(
    text: str, recipe: Recipe, tree: SourceTree, *, destination: Path, patches: list[Patch]
) -> str:
    """Why the rebased text is not the recipe wanted (read as `destination`), or ''."""
    try:
        candidate = load_recipe_text(text, path=destination, collection=recipe.collection)
    except RegistryError as exc:
        return f"does not load: {exc}"
    wanted = [(p.target, [(e.match, e.kind, e.text) for e in p.edits]) for p in patches]
    got = [(p.target, [(e.match, e.kind, e.text) for e in p.edits]) for p in candidate.patches]
    if got != wanted:
        return f"does not read back as rebased (rewriting {recipe.path} in place went wrong)"
    bad = [c for c in check_recipe(candidate, tree=tree) if c.status not in ("ok",)]
    return "does not check: " + "; ".join(f"{c.target}: {c.status}" for c in bad) if bad else ""

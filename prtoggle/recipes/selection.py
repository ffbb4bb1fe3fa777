"""Which recipes a revert request uses: one PR number in several collections, judged per install.

The rule (docs/sglang.md, "One PR number, several collections"): for a request `N` (every
collection) or `C:N` (collection C only),

1. a recipe whose `applies_to` excludes the installed version does not take part;
2. with `search_path` given (the CLI, before a program starts), a recipe of a bare `N`
   whose target package cannot be found does not take part either (the demo engine's
   recipes in a real engine's environment); `C:N` still reaches it, and in a process it
   waits for the import, inert;
3. among the recipes left for one package, a maintained one (a recipe directory) is used
   and the built-in upstream text (sglang's own registration) is left out;
4. an upstream text used is checked against the installed source first (without import):
   stale text does not take part.

A request none of whose recipes takes part is refused (`refusal()`): which recipe, why,
and what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from prtoggle.recipes.registry import Recipe, Registry
from prtoggle.recipes.resolution import package_root
from prtoggle.recipes.versions import installed_version

if TYPE_CHECKING:
    from prtoggle.patching.source_files import SourceTree

LeftOutKind = Literal["out-of-range", "absent", "shadowed", "stale"]


@dataclass(frozen=True)
class RevertRequest:
    """One requested revert: PR `pr`, in `collection` only when qualified (`C:N`)."""

    pr: int
    collection: str | None = None

    @property
    def text(self) -> str:
        return f"{self.collection}:{self.pr}" if self.collection else str(self.pr)


@dataclass(frozen=True)
class LeftOut:
    """A recipe of the requested PR that does not take part, and why."""

    recipe: Recipe
    kind: LeftOutKind
    reason: str

    def line(self) -> str:
        return f"{self.recipe.label} ({self.kind}: {self.reason})"


@dataclass(frozen=True)
class Selection:
    """The recipes a request uses, and the ones of its PR that do not take part."""

    request: RevertRequest
    recipes: tuple[Recipe, ...]
    left_out: tuple[LeftOut, ...]


def select(
    registry: Registry, request: RevertRequest, *, search_path: Sequence[str] | None = None
) -> Selection:
    """Apply the rule to `request`; an unknown PR or collection raises UnknownPRError."""
    candidates = registry.find(request.pr, collection=request.collection)
    kept: list[Recipe] = []
    left_out: list[LeftOut] = []
    if request.collection is not None:
        search_path = None  # named by its collection: used wherever its package is
    for recipe in candidates:
        why = _not_taking_part(recipe, search_path=search_path)
        if why is None:
            kept.append(recipe)
        else:
            left_out.append(why)
    chosen: list[Recipe] = []
    for recipe in kept:
        shadow = _shadowed_by(registry, recipe, kept)
        if shadow is not None:
            reason = f"{shadow.label} is the maintained recipe for the installed code"
            left_out.append(LeftOut(recipe, "shadowed", reason))
            continue
        stale = _stale_upstream(registry, recipe)
        if stale is not None:
            left_out.append(LeftOut(recipe, "stale", stale))
            continue
        chosen.append(recipe)
    return Selection(request=request, recipes=tuple(chosen), left_out=tuple(left_out))


def refusal(selection: Selection) -> str:
    """Why no recipe of the request applies, and what to do (the request's one error line)."""
    request = selection.request
    reasons = "; ".join(_refusal_part(item) for item in selection.left_out)
    return f"{request.text}: no recipe applies to the installed code: {reasons}"


def left_out_note(selections: Sequence[Selection]) -> str | None:
    """One line naming what an `all` request left out and why; None when nothing was."""
    items = [item.line() for selection in selections for item in selection.left_out]
    if not items:
        return None
    recipes = "1 recipe that does" if len(items) == 1 else f"{len(items)} recipes that do"
    return f"left out {recipes} not apply here: {'; '.join(items)}"


def absent_note(selections: Sequence[Selection]) -> str | None:
    """One line naming the recipes bare numbers left out because their package is not
    importable here, where another collection's recipe of the PR is used; None: none."""
    labels = [
        item.recipe.label
        for selection in selections
        if selection.recipes
        for item in selection.left_out
        if item.kind == "absent"
    ]
    if not labels:
        return None
    named = ", ".join(label.replace("/", ":") for label in labels)
    them = "it" if len(labels) == 1 else "them"
    return (
        f"left out {', '.join(labels)}: package not importable here "
        f"(name {them} as {named} to revert {them} anyway)"
    )


def package_of(recipe: Recipe) -> str:
    """The top-level package of what the recipe reverts: its first patch target, else its
    first `names` scope, else the first module it makes unimportable."""
    dotted = [
        *(patch.target for patch in recipe.patches),
        *(change.scope for change in recipe.names),
        *recipe.added_modules,
    ]
    return dotted[0].split(".", 1)[0] if dotted else ""


def _not_taking_part(recipe: Recipe, *, search_path: Sequence[str] | None) -> LeftOut | None:
    if recipe.applies_to is not None:
        distribution = recipe.applies_to.distribution
        version = installed_version(distribution)
        if version is not None and not recipe.applies_to.contains(version):
            reason = f"installed {distribution} {version}, range {recipe.applies_to.text}"
            return LeftOut(recipe, "out-of-range", reason)
    if (
        search_path is not None
        and package_root(package_of(recipe), search_path=search_path) is None
    ):
        return LeftOut(recipe, "absent", f"package {package_of(recipe)} is not installed")
    return None


def _shadowed_by(registry: Registry, recipe: Recipe, kept: Sequence[Recipe]) -> Recipe | None:
    """The maintained recipe that takes `recipe`'s place (an upstream text only)."""
    if not registry.is_upstream(recipe.collection):
        return None
    package = package_of(recipe)
    maintained = [r for r in kept if not registry.is_upstream(r.collection)]
    return next((other for other in maintained if package_of(other) == package), None)


def _stale_upstream(registry: Registry, recipe: Recipe) -> str | None:
    """Why an upstream text does not apply to the installed source, None when it does."""
    if not registry.is_upstream(recipe.collection):
        return None
    from prtoggle.patching.source_files import open_source_tree

    root = package_root(package_of(recipe))
    if root is None:
        return None  # nothing installed to check against: it waits for the import
    tree = open_source_tree(root)
    if _match_lines_present(recipe, tree):
        return None  # the exact check (once per edit, compiles) is made when it is applied
    from prtoggle.recipes.check import check_recipe

    for check in check_recipe(recipe, tree=tree):
        if check.failed:
            return check.message.splitlines()[0] if check.message else check.target
    return None


def _match_lines_present(recipe: Recipe, tree: SourceTree) -> bool:
    """Whether every edit's match lines (whitespace-stripped, in order) are in its module.

    A cheap first look (one file read per target, no parse): every process under
    `prtoggle run` selects again. When it says no, check_recipe says exactly why.
    """
    for patch in recipe.patches:
        source = _module_source(patch.target, tree)
        if source is None:
            return False
        lines = "\n".join(line.strip() for line in source.splitlines())
        for edit in patch.edits:
            wanted = "\n".join(line.strip() for line in edit.match.strip("\n").splitlines())
            if wanted not in lines:
                return False
    return True


def _module_source(target: str, tree: SourceTree) -> str | None:
    """The text of the module holding `target` (the longest dotted prefix that is a file)."""
    parts = target.split(".")
    for end in range(len(parts) - 1, 0, -1):
        for relative in ("/".join(parts[:end]) + ".py", "/".join(parts[:end]) + "/__init__.py"):
            found = tree.read(relative)
            if found is not None:
                return found.text
    return None


def _refusal_part(item: LeftOut) -> str:
    recipe = item.recipe
    if item.kind == "out-of-range":
        todo = "use a recipe for the installed version or install a version in that range"
    elif item.kind == "stale":
        todo = (
            f"`prtoggle check {recipe.pr} --collection {recipe.collection}` shows the nearest "
            "lines; add a recipe for the installed version (a PRTOGGLE_YAML_PATH collection)"
        )
    elif item.kind == "absent":
        todo = "install the package, or name another collection's recipe (C:N)"
    else:
        todo = "name the recipe you want as COLLECTION:PR"
    return f"{recipe.label} is {_kind_text(item.kind)}: {item.reason}; {todo}"


def _kind_text(kind: LeftOutKind) -> str:
    return {
        "out-of-range": "out of range",
        "absent": "absent",
        "shadowed": "shadowed",
        "stale": "stale: its match text is not in the installed code",
    }[kind]

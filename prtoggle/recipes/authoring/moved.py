"""Find where a recipe's target moved: the function of its package that holds its edits."""

from __future__ import annotations

from dataclasses import dataclass

from prtoggle.errors import PrToggleError
from prtoggle.patching.editor import edits_apply, match_lines
from prtoggle.patching.source_files import SourceFile, SourceTree
from prtoggle.patching.types import Edit, Patch
from prtoggle.recipes.authoring.placement import layout
from prtoggle.recipes.authoring.reanchor import MIN_SIMILARITY, best_similarity

MOVED_MARGIN = 0.1
"""The most similar function must be this much more similar than the next, or it is a tie."""
DISTINCTIVE_LENGTH = 16
"""Match lines this long or longer (stripped) pick the functions compared with the matches."""
MODULE_SHARE = 0.5
"""Modules holding less than this share of the match lines the best module holds are skipped."""
SHORTLIST = 8
"""The functions sharing the most match text are the ones whose similarity is measured."""


@dataclass(frozen=True)
class Candidate:
    """A function of the package: its dotted name, its text, its similarity to the matches."""

    target: str
    text: str
    similarity: float


@dataclass(frozen=True)
class Moved:
    """The function the target moved to (None: nowhere, or no single one), the best
    similarity seen, and why none when several came close (`reason`)."""

    found: Candidate | None
    similarity: float = 0.0
    reason: str = ""


def find_moved(patch: Patch, tree: SourceTree) -> Moved:
    """The function of the target's top-level package that `patch` now belongs in.

    The functions where every edit matches exactly, in order, come first (among several,
    the one of the same name; else none). Without one, the functions sharing a distinctive
    line with the edits' matches (the SHORTLIST holding most of the match lines as they
    are) are ranked by their similarity to the matches: per edit, that of the window most
    like its match, weighted by the match's lines. The first is taken when it is at least
    MIN_SIMILARITY and MOVED_MARGIN ahead of the second; else it is a tie, both named.
    """
    name = patch.target.rsplit(".", 1)[-1]
    candidates = _candidates(patch, tree)
    exact = [c for c in candidates if edits_apply(source=c.text, edits=patch.edits)]
    if len(exact) > 1:
        exact = [c for c in exact if c.target.rsplit(".", 1)[-1] == name] or exact
    if len(exact) == 1:
        return Moved(Candidate(exact[0].target, exact[0].text, 1.0), 1.0)
    if exact:
        named = " and ".join(c.target for c in exact)
        return Moved(None, 1.0, f"every edit matches exactly in each of {named}")
    shortlist = sorted(candidates, key=lambda c: (-_shared(c.text, patch.edits), c.target))
    ranked = sorted(
        (
            Candidate(c.target, c.text, _similarity(c.text, patch.edits))
            for c in shortlist[:SHORTLIST]
        ),
        key=lambda c: (-c.similarity, c.target),
    )
    return _ranked(ranked)


def _ranked(ranked: list[Candidate]) -> Moved:
    """The first of `ranked` when clearly ahead; else none, the close ones named."""
    if not ranked or ranked[0].similarity < MIN_SIMILARITY:
        return Moved(None, ranked[0].similarity if ranked else 0.0)
    best = ranked[0]
    if len(ranked) > 1 and best.similarity - ranked[1].similarity < MOVED_MARGIN:
        second = ranked[1]
        return Moved(
            None,
            best.similarity,
            f"moved candidates {best.target} (similarity {best.similarity:.3f}) and "
            f"{second.target} ({second.similarity:.3f}) are too close to tell apart "
            f"(margin {MOVED_MARGIN})",
        )
    return Moved(best, best.similarity)


def _candidates(patch: Patch, tree: SourceTree) -> list[Candidate]:
    """The functions holding a distinctive match line, in the modules of the target's
    top-level package that hold at least MODULE_SHARE as much of those lines as the most."""
    needles = _needles(patch.edits)
    modules = []
    for relative, source in _package_sources(tree, patch.target.split(".", 1)[0]):
        score = sum(len(needle) for needle in needles if needle in source.text)
        if score:
            modules.append((score, relative, source))
    floor = MODULE_SHARE * max((score for score, _, _ in modules), default=0)
    found: list[Candidate] = []
    for _, relative, source in (item for item in modules if item[0] >= floor):
        module = relative[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        try:
            functions = layout(source.text, name=source.name)
        except PrToggleError:
            continue
        for qualname in functions.functions:
            lines = functions.text(qualname)
            if needles & {line.strip() for line in lines}:
                text = "".join(f"{line}\n" for line in lines)
                found.append(Candidate(f"{module}.{qualname}", text, 0.0))
    return found


def _package_sources(tree: SourceTree, top: str) -> list[tuple[str, SourceFile]]:
    """(module-relative path, file) of every `.py` file of package `top`, read once per
    tree: the targets of one recipe that all moved search the same files."""

    def read() -> list[tuple[str, SourceFile]]:
        found = ((relative, tree.read(relative)) for relative in tree.python_files(top))
        return [(relative, source) for relative, source in found if source is not None]

    return tree.memo("moved: package sources", top, read)


def _needles(edits: tuple[Edit, ...]) -> set[str]:
    """The distinctive stripped match lines; without one, the longest match line."""
    lines = [line for edit in edits for line in match_lines(edit.match)]
    distinctive = {line for line in lines if len(line) >= DISTINCTIVE_LENGTH}
    return distinctive or set(sorted(lines, key=len)[-1:])


def _shared(text: str, edits: tuple[Edit, ...]) -> int:
    """How many characters of the match lines occur as whole lines of `text` (stripped)."""
    have = {line.strip() for line in text.splitlines()}
    return sum(len(line) for edit in edits for line in match_lines(edit.match) if line in have)


def _similarity(text: str, edits: tuple[Edit, ...]) -> float:
    """The edits' best-window similarities in `text`, weighted by their match lines."""
    weights = [len(match_lines(edit.match)) for edit in edits]
    if not sum(weights):
        return 0.0
    scores = [best_similarity(text, edit.match) for edit in edits]
    return sum(w * s for w, s in zip(weights, scores, strict=True)) / sum(weights)

"""Check that revert recipes still apply and compile, and diff fixed vs reverted per target."""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FunctionType
from typing import Literal

from prtoggle.errors import (
    EditMatchError,
    PrToggleError,
    TargetResolutionError,
    VersionRangeError,
)
from prtoggle.patching.lines import split_lines
from prtoggle.patching.source_files import SourceTree, open_source_tree
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.patching.swap import apply_layers, build_replacement
from prtoggle.patching.targets import FunctionSource, function_source, import_target
from prtoggle.recipes.registry import Patch, Recipe, Registry
from prtoggle.recipes.versions import out_of_range

DIFF_CONTEXT_LINES = 3
CHECK_STATUSES = ("ok", "stale", "absent", "not-applicable", "error")
CheckStatus = Literal["ok", "stale", "absent", "not-applicable", "error"]


@dataclass(frozen=True)
class TargetCheck:
    """Whether one target of one fix reverts cleanly; `message` says why when not.

    `status`: ok (applies, compiles, takes effect), stale (a match is not found once, or
    the target's module or function is gone: the code moved on), absent (the target's
    top-level package is not installed, or not in the checked tree), not-applicable (the
    recipe's `applies_to` range excludes the version of the tree or of the installed
    distribution), error (anything else: the edit is refused or does not compile, the
    module fails to import, ...).
    `source` is the checked tree or archive, None for the imported modules. `found_as`
    names where the target's function is defined when the target names it elsewhere (a
    re-export), as the runtime finds it.
    """

    pr: int
    target: str
    ok: bool
    message: str
    status: CheckStatus = "ok"
    collection: str = ""
    source: str | None = None
    found_as: str | None = None

    @property
    def failed(self) -> bool:
        """Stale or error; absent fails only for a strict caller, not-applicable never."""
        return self.status in ("stale", "error")

    @property
    def reason(self) -> str:
        """`message` without a leading `<target>: `: for a line that names the target already."""
        prefix = f"{self.target}: "
        return self.message[len(prefix) :] if self.message.startswith(prefix) else self.message


@dataclass(frozen=True)
class TargetDiff:
    """The fixed and reverted source of one target; both start at file line `first_line`."""

    pr: int
    target: str
    filename: str
    first_line: int
    fixed_source: str
    reverted_source: str

    def unified_diff(self) -> str:
        """Unified diff fixed -> reverted; hunk headers carry real file line numbers."""
        fixed = split_lines(self.fixed_source)
        reverted = split_lines(self.reverted_source)
        out = [f"--- {self.filename} (fixed)", f"+++ {self.filename} (PR {self.pr} reverted)"]
        matcher = difflib.SequenceMatcher(None, fixed, reverted, autojunk=False)
        for group in matcher.get_grouped_opcodes(DIFF_CONTEXT_LINES):
            old = _hunk_range(self.first_line, group[0][1], group[-1][2])
            new = _hunk_range(self.first_line, group[0][3], group[-1][4])
            out.append(f"@@ -{old} +{new} @@")
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    out.extend(f" {line}" for line in fixed[i1:i2])
                    continue
                out.extend(f"-{line}" for line in fixed[i1:i2])
                out.extend(f"+{line}" for line in reverted[j1:j2])
        return "\n".join(out) + "\n"


def check_registry(
    *,
    registry: Registry,
    source_root: Path | SourceTree | None = None,
    prs: Sequence[int] | None = None,
) -> list[TargetCheck]:
    """check_recipe for every fix of `registry` (or of `prs`, in every collection), in PR order."""
    recipes = [
        recipe
        for pr in (prs if prs is not None else registry.prs())
        for recipe in registry.find(pr)
    ]
    tree = _open(source_root)
    return [check for recipe in recipes for check in check_recipe(recipe, tree=tree)]


def check_recipe(recipe: Recipe, *, tree: SourceTree | None = None) -> list[TargetCheck]:
    """For every target of `fix`: its edits apply exactly once, compile and take effect.

    Nothing is patched: the edited code is compiled, never swapped in. With `tree`,
    targets are found in its files by module path and AST, without importing; otherwise
    their modules are imported. A target whose top-level package is missing is absent.
    """
    results = []
    for patch in recipe.patches:
        status, message, found_as = _check_target(recipe, patch, tree=tree)
        results.append(
            TargetCheck(
                pr=recipe.pr,
                target=patch.target,
                ok=status == "ok",
                message=message,
                status=status,
                collection=recipe.collection,
                source=tree.label if tree is not None else None,
                found_as=found_as,
            )
        )
    return results + _whole_fix_checks(recipe, tree=tree)


def recipe_diffs(
    recipe: Recipe, *, source_root: Path | SourceTree | None = None
) -> list[TargetDiff]:
    """One TargetDiff per target of `fix`; raises the first PrToggleError met.

    An edit that cannot take effect (a decorator line, a default not evaluable in the
    module) is refused here as at apply time, so `show` never shows a diff that a revert
    would not carry out, nor a diff of a version outside the recipe's `applies_to`.
    """
    tree = _open(source_root)
    outside = out_of_range(recipe, tree=tree)
    if outside is not None:
        raise VersionRangeError(f"{recipe.label}: no diff to show: {outside}")
    diffs = []
    for patch in recipe.patches:
        source, function = _target_source(patch.target, tree=tree)
        layer = recipe.edit_layer(patch.target)
        build_replacement(source, [layer], function=function, evaluate=False)
        edited = apply_layers(source, [layer])
        diffs.append(
            TargetDiff(
                pr=recipe.pr,
                target=patch.target,
                filename=source.filename,
                first_line=source.first_line,
                fixed_source=source.text,
                reverted_source=edited.text,
            )
        )
    return diffs


def _whole_fix_checks(recipe: Recipe, *, tree: SourceTree | None) -> list[TargetCheck]:
    """The recipe's `names` and `not_reverted` entries checked (issue 27), one row each."""
    if not recipe.names and not recipe.not_reverted:
        return []
    from prtoggle.recipes.names_check import check_whole_fix

    outside = out_of_range(recipe, tree=tree)
    return [
        TargetCheck(
            pr=recipe.pr,
            target=found.target,
            ok=outside is None and found.status == "ok",
            message=outside or found.message,
            status="not-applicable" if outside is not None else found.status,
            collection=recipe.collection,
            source=tree.label if tree is not None else None,
        )
        for found in check_whole_fix(recipe, tree=tree)
    ]


def _check_target(
    recipe: Recipe, patch: Patch, *, tree: SourceTree | None
) -> tuple[CheckStatus, str, str | None]:
    """(status, message, where the function is defined when re-exported)."""
    top = patch.target.split(".", 1)[0]
    if tree is not None and not tree.has_package(top):
        return "absent", f"package {top} is not in {tree.label}", None
    if tree is None and not _installed(top):
        return "absent", f"package {top} is not installed", None
    outside = out_of_range(recipe, tree=tree)
    if outside is not None:
        return "not-applicable", outside, None
    try:
        source, function = _target_source(patch.target, tree=tree)
        build_replacement(
            source, [recipe.edit_layer(patch.target)], function=function, evaluate=False
        )
    except PrToggleError as exc:
        return _failure_status(exc), str(exc), None
    return "ok", "", source.found_as


def _failure_status(exc: PrToggleError) -> CheckStatus:
    """stale when the code moved on (no match, no such function or module), else error."""
    if isinstance(exc, EditMatchError):
        return "stale"
    if isinstance(exc, TargetResolutionError) and (
        exc.__cause__ is None or isinstance(exc.__cause__, AttributeError)
    ):
        return "stale"
    return "error"


def _installed(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def _open(source_root: Path | SourceTree | None) -> SourceTree | None:
    if source_root is None or isinstance(source_root, SourceTree):
        return source_root
    return open_source_tree(source_root)


def _target_source(
    target: str, *, tree: SourceTree | None
) -> tuple[FunctionSource, FunctionType | None]:
    if tree is not None:
        return find_in_source_tree(target, source_root=tree), None
    function = import_target(target).function
    return function_source(function, target=target), function


def _hunk_range(first_line: int, start: int, stop: int) -> str:
    length = stop - start
    begin = first_line + start if length else first_line + start - 1
    return f"{begin}" if length == 1 else f"{begin},{length}"

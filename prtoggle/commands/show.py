"""`show`: a recipe's metadata as `show --json` and `list --json` give it, and its diffs."""

from __future__ import annotations

from typing import Any

from prtoggle.errors import PrToggleError
from prtoggle.recipes.check import TargetDiff, fix_diffs
from prtoggle.recipes.registry import Recipe
from prtoggle.recipes.resolution import (
    command_search_path,
    import_free_source_root,
    refuse_absent_packages,
)


def recipe_metadata(fix: Recipe) -> dict[str, Any]:
    """A recipe's metadata as `show --json` and `list --json` give it."""
    return {
        "pr": fix.pr,
        "collection": fix.collection,
        "title": fix.title,
        "url": fix.url,
        "merged": fix.merged.isoformat() if fix.merged else None,
        "component": fix.component,
        "symptom": fix.symptom,
        "expect": fix.expect,
        "repro": fix.repro,
        "bench": fix.bench,
        "file": str(fix.path),
        "acts_at_capture": fix.acts_at_capture,
        "targets": [patch.target for patch in fix.patches],
        **whole_fix_metadata(fix),
    }


def whole_fix_metadata(fix: Recipe) -> dict[str, Any]:
    """`names`, `partial` and `not_reverted` as `show --json` and `list --json` give them."""
    return {
        "names": [
            {"scope": n.scope, "define": n.define, "remove": list(n.remove)} for n in fix.names
        ],
        "partial": fix.partial,
        "not_reverted": [
            {"file": k.file, "line": k.line, "reason": k.reason, "code": k.code}
            for k in fix.not_reverted
        ],
    }


def diffs_or_error(fix: Recipe) -> tuple[list[TargetDiff], PrToggleError | None]:
    """The recipe's diffs fixed -> reverted, or why they cannot be shown here."""
    search_path = command_search_path()
    try:
        refuse_absent_packages(fix, search_path=search_path)
        root = import_free_source_root(fix, search_path=search_path)
        return fix_diffs(fix, source_root=root), None
    except PrToggleError as exc:
        return [], exc

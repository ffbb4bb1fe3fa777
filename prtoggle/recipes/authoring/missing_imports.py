"""Pre-fix statements that import a module the installed package no longer has, left out.

A `names` entry's `define` runs at revert time, in the installed code. When it imports a
module of the package that a later change deleted or moved (`from sglang.jit_kernel
import utils` after `sglang.jit_kernel` was retired), the revert fails at run time with
ModuleNotFoundError and nothing of the recipe lands. Drafting drops such statements
instead, each listed in `not_reverted` by the names it binds, so the rest of the revert
lands (the global check then drops what reads the names left undefined).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import replace

from prtoggle.patching.define_code import define_bindings, parse_define
from prtoggle.recipes.authoring.from_diff import DraftNames, NotRevertedChange

ModuleKnown = Callable[[str], "bool | None"]
"""Whether the installed package has module `name`: True, False, or None (not the
package's module: unknown, kept)."""


def without_missing_imports(
    names: Sequence[DraftNames], not_reverted: list[NotRevertedChange], *, has_module: ModuleKnown
) -> list[DraftNames]:
    """`names`, each define less its top-level imports of modules `has_module` says are
    missing; each statement dropped listed in `not_reverted`. Entries left empty go."""
    kept = []
    for entry in names:
        smaller = _without_missing(entry, not_reverted, has_module=has_module)
        if smaller.define.strip() or smaller.remove:
            kept.append(smaller)
    return kept


def _without_missing(
    entry: DraftNames, not_reverted: list[NotRevertedChange], *, has_module: ModuleKnown
) -> DraftNames:
    if not entry.define.strip():
        return entry
    try:
        body = parse_define(entry.define).body
    except SyntaxError:
        return entry  # the names check refuses it with the reason
    lines = entry.define.splitlines(keepends=True)
    dropped: set[int] = set()
    for node in body:
        missing = _missing_module(node, has_module)
        if missing is None:
            continue
        text = "".join(lines[node.lineno - 1 : node.end_lineno])
        bound = ", ".join(f"`{entry.scope}.{name}`" for name in define_bindings(text))
        what = bound or f"a statement of {entry.scope}"
        reason = (
            f"{what} not defined back: its pre-fix code imports `{missing}`, which the "
            "installed package does not have"
        )
        not_reverted.append(NotRevertedChange(entry.file, entry.line, reason))
        dropped.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    if not dropped:
        return entry
    define = "".join(line for index, line in enumerate(lines) if index not in dropped)
    return replace(entry, define=define if define.strip() else "")


def _missing_module(node: ast.stmt, has_module: ModuleKnown) -> str | None:
    """The module an absolute import statement needs that the installed package lacks."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        wanted = [node.module]
    else:
        return None
    for module in wanted:
        parts = module.split(".")
        for end in range(1, len(parts) + 1):  # the outermost missing package names it
            if has_module(".".join(parts[:end])) is False:
                return ".".join(parts[:end])
    return None

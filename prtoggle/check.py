"""Check that revert recipes still apply and compile, and diff fixed vs reverted per target."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prtoggle.errors import PrToggleError
from prtoggle.patching.swap import EditLayer, build_code, edited_source
from prtoggle.patching.targets import FunctionSource, function_source, import_target
from prtoggle.registry import Fix, Patch, Registry

DIFF_CONTEXT_LINES = 3


@dataclass(frozen=True)
class TargetCheck:
    """Whether one target of one fix applies exactly and compiles; `message` when not."""

    pr: int
    target: str
    ok: bool
    message: str


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
        fixed = self.fixed_source.splitlines()
        reverted = self.reverted_source.splitlines()
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


def check_fixes(
    *, registry: Registry, source_root: Path | None = None, prs: Sequence[int] | None = None
) -> list[TargetCheck]:
    """For every target of every fix (or of `prs`): edits apply exactly once and compile.

    Nothing is patched: the edited code is compiled, never swapped in. With
    `source_root`, targets are found in files under it by module path and AST, without
    importing; otherwise their modules are imported.
    """
    results = []
    fixes = [f for pr in (prs if prs is not None else registry.prs()) for f in registry.find(pr)]
    for fix in fixes:
        pr = fix.pr
        for patch in fix.patches:
            try:
                source = _target_source(patch.target, source_root=source_root)
                build_code(source, [_layer(fix, patch)])
            except PrToggleError as exc:
                results.append(TargetCheck(pr=pr, target=patch.target, ok=False, message=str(exc)))
                continue
            results.append(TargetCheck(pr=pr, target=patch.target, ok=True, message=""))
    return results


def fix_diffs(fix: Fix, *, source_root: Path | None = None) -> list[TargetDiff]:
    """One TargetDiff per target of `fix`; raises the first PrToggleError met."""
    diffs = []
    for patch in fix.patches:
        source = _target_source(patch.target, source_root=source_root)
        edited = edited_source(source, [_layer(fix, patch)])
        diffs.append(
            TargetDiff(
                pr=fix.pr,
                target=patch.target,
                filename=source.filename,
                first_line=source.first_line,
                fixed_source=source.text,
                reverted_source=edited.text,
            )
        )
    return diffs


def _target_source(target: str, *, source_root: Path | None) -> FunctionSource:
    if source_root is not None:
        from prtoggle.patching.source_tree import find_in_source_tree

        return find_in_source_tree(target, source_root=source_root)
    return function_source(import_target(target).function, target=target)


def _layer(fix: Fix, patch: Patch) -> EditLayer:
    return EditLayer(pr=fix.pr, patch=patch, yaml_path=str(fix.path))


def _hunk_range(first_line: int, start: int, stop: int) -> str:
    length = stop - start
    begin = first_line + start if length else first_line + start - 1
    return f"{begin}" if length == 1 else f"{begin},{length}"

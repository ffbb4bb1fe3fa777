"""sglang's `source_patcher` API (same names and signatures) on prtoggle's patching."""

from __future__ import annotations

import itertools
import logging
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prtoggle.errors import PatchApplicationError, RegistryError, UnsupportedTargetError
from prtoggle.patching.editor import edit_text
from prtoggle.patching.swap import EditLayer
from prtoggle.patching.targets import import_target
from prtoggle.patching.types import EDIT_KINDS, Edit, EditKind, Patch
from prtoggle.recipes.patch_schema import one_edit_kind
from prtoggle.recipes.schema import load_patches
from prtoggle.recipes.yaml_reading import short, short_text
from prtoggle.revert import state as revert_state

logger = logging.getLogger(__name__)

_PATCH_KEYS = ("target", "edits", "preamble")
_EDIT_KEYS = ("match", *EDIT_KINDS)
_LAYER_NUMBERS = itertools.count(-1, -1)
"""Each applied patch is one layer of the swapper prtoggle's reverts use (one record of what
is patched, so the two APIs stack and restore in any order), numbered below zero so that it
never takes a PR number's place."""


@dataclass(frozen=True)
class EditSpec:
    """One edit, as sglang spells it: `match` and at most one non-blank of the other three.

    All three blank deletes the matched lines (sglang's rule).
    """

    match: str
    replacement: str = ""
    prepend: str = ""
    append: str = ""

    def __post_init__(self) -> None:
        _edit_kind(self, where="EditSpec")


@dataclass(frozen=True)
class PatchSpec:
    """The edits of one dotted target, plus text inserted at the top of its body."""

    target: str
    edits: list[EditSpec | Edit]
    preamble: str = ""


@dataclass
class PatchState:
    """One applied patch: `restore()` removes it; the last one off gives back the original code.

    Patches of one function stack (a later one edits the earlier one's result) and may be
    restored in any order. A second restore does nothing.
    """

    target_fn: types.FunctionType
    original_code: types.CodeType
    target: str
    _layer: int = field(repr=False, default=0)
    _active: bool = field(repr=False, default=False)

    def restore(self) -> None:
        with revert_state.locked():
            if not self._active:
                return
            revert_state.swapper().unpatch(self.target_fn, self._layer)
            self._active = False


def apply_edits(*, source: str, edits: Iterable[Any]) -> str:
    """Source text in, edited text out: each edit applied in order (sglang's `apply_edits`).

    `edits` are EditSpec objects (prtoggle's or sglang's) or mappings with the same keys.
    Matching and errors are prtoggle's: lines compared whitespace-stripped, exactly one
    match, diagnostics with line numbers counted from 1.
    """
    converted = [_as_edit(edit, index) for index, edit in enumerate(edits, start=1)]
    text = edit_text(source=source, edits=converted)
    return text if source.endswith("\n") or not text.endswith("\n") else text[:-1]


def patch_function(*, target: Any, edits: Iterable[Any], preamble: str = "") -> PatchState:
    """Patch one live function from its file's source; the handle restores it."""
    function = getattr(target, "__func__", target)
    if not isinstance(function, types.FunctionType):
        raise UnsupportedTargetError(
            f"patch_function: target {short(target)} is a {type(target).__name__}, not a Python "
            "function; expected a function or method defined in Python source"
        )
    name = f"{function.__module__}.{function.__qualname__}"
    spec = PatchSpec(target=name, edits=list(edits), preamble=preamble)
    return _patch_resolved(function, spec)


def apply_patches_from_config(
    yaml_content: str, *, extra_imports: list[str] | None = None
) -> list[PatchState]:
    """Parse recipe YAML (sglang's `patches:` text, or a prtoggle recipe) and apply it all.

    `extra_imports` lines go at the top of every patched body, before any preamble. All
    patches apply or none do: a failure restores the ones already applied, then raises.
    """
    specs = [
        PatchSpec(target=patch.target, edits=list(patch.edits), preamble=patch.preamble)
        for patch in load_patches(yaml_content)
    ]
    if extra_imports:
        block = "\n".join(extra_imports)
        specs = [
            PatchSpec(
                target=spec.target,
                edits=spec.edits,
                preamble=f"{block}\n{spec.preamble}" if spec.preamble.strip() else block,
            )
            for spec in specs
        ]
    return _apply_specs(specs)


class CodePatcher:
    """Context manager: patches on enter, restores in reverse order on exit."""

    def __init__(self, *, patches: list[Any]) -> None:
        self._patches = patches
        self._states: list[PatchState] = []

    def __enter__(self) -> CodePatcher:
        self._states = _apply_specs([_as_patch_spec(spec) for spec in self._patches])
        return self

    def __exit__(self, exc_type: object, exc_val: object, exc_tb: object) -> None:
        states, self._states = self._states, []
        _restore_all(states)


def _apply_specs(specs: list[PatchSpec]) -> list[PatchState]:
    states: list[PatchState] = []
    try:
        for spec in specs:
            function = import_target(spec.target).function
            logger.info("patching %s", spec.target)
            states.append(_patch_resolved(function, spec))
    except BaseException:
        _restore_all(states)
        raise
    return states


def _patch_resolved(function: types.FunctionType, spec: PatchSpec) -> PatchState:
    edits = tuple(_as_edit(edit, index) for index, edit in enumerate(spec.edits, start=1))
    patch = Patch(target=spec.target, edits=edits, line=0, preamble=spec.preamble)
    with revert_state.locked():
        layer = next(_LAYER_NUMBERS)
        swapper = revert_state.swapper()
        original = swapper.original_code(function)
        swapper.patch(function, EditLayer(pr=layer, patch=patch, yaml_path=None))
    return PatchState(
        target_fn=function, original_code=original, target=spec.target, _layer=layer, _active=True
    )


def _restore_all(states: list[PatchState]) -> None:
    for state in reversed(states):
        state.restore()


def _as_patch_spec(item: Any) -> PatchSpec:
    if isinstance(item, PatchSpec):
        return item
    if not isinstance(item, Mapping):
        item = {key: getattr(item, key) for key in _PATCH_KEYS if hasattr(item, key)}
    entry = _checked_mapping(item, "patch", required=("target", "edits"), allowed=_PATCH_KEYS)
    target, edits, preamble = entry["target"], entry["edits"], entry.get("preamble") or ""
    if not isinstance(target, str) or "." not in target:
        raise RegistryError(f"patch: 'target' must be a dotted path, got {short(target)}")
    if not isinstance(edits, list) or not edits:
        raise RegistryError(
            f"patch {short_text(target)}: 'edits' must be a non-empty list, got {short(edits)}"
        )
    if not isinstance(preamble, str):
        raise RegistryError(
            f"patch {short_text(target)}: 'preamble' must be a string, got {short(preamble)}"
        )
    return PatchSpec(target=target, edits=list(edits), preamble=preamble)


def _as_edit(edit: Any, index: int) -> Edit:
    """An Edit from prtoggle's Edit, an EditSpec (either package's) or a mapping."""
    if isinstance(edit, Edit):
        return edit
    if isinstance(edit, Mapping):
        _checked_mapping(edit, f"edit {index}", required=("match",), allowed=_EDIT_KEYS)
    kind, text = _edit_kind(edit, where="edit", index=index)
    match = _field(edit, "match")
    if not match.strip():
        raise PatchApplicationError(f"edit {index}: empty match text; expected code to match")
    return Edit(match=match, kind=kind, text=text, line=index)


def _edit_kind(edit: Any, *, where: str, index: int | None = None) -> tuple[EditKind, str]:
    mapping = isinstance(edit, Mapping)
    texts: dict[EditKind, str] = {kind: _field(edit, kind, mapping=mapping) for kind in EDIT_KINDS}
    return one_edit_kind(texts, where=where if index is None else f"{where} {index}")


def _field(edit: Any, key: str, *, mapping: bool | None = None) -> str:
    if mapping is None:
        mapping = isinstance(edit, Mapping)
    value = edit.get(key) if mapping else getattr(edit, key, None)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PatchApplicationError(f"edit: {key!r} must be a string, got {short(value)}")
    return value


def _checked_mapping(
    value: Any, what: str, *, required: tuple[str, ...], allowed: tuple[str, ...]
) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RegistryError(
            f"{what}: expected a mapping with keys {', '.join(required)}; "
            f"got {type(value).__name__} {short(value)}"
        )
    unknown = [key for key in value if key not in allowed]
    if unknown:
        raise RegistryError(
            f"{what}: unknown key {short(unknown[0])}; expected one of: {', '.join(allowed)}"
        )
    missing = [key for key in required if key not in value]
    if missing:
        raise RegistryError(f"{what}: missing required key {missing[0]!r}")
    return value

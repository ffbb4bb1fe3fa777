"""The `patches:` block (sglang's source_patcher format): targets and edits checked, by line."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from prtoggle.errors import RegistryError
from prtoggle.patching.types import EDIT_KINDS, Edit, EditKind, Patch
from prtoggle.recipes.yaml_reading import LineDict, LineList, short

DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
"""A dotted Python name: `module`, `package.module`, `module.Class.function`."""
_PATCH_REQUIRED = ("target", "edits")
_PATCH_OPTIONAL = ("preamble",)


def validate_patches(mapping: LineDict, path: Path) -> tuple[Patch, ...]:
    """The `patches:` list of a recipe mapping, each target once, each edit of one kind."""
    items = mapping["patches"]
    if not isinstance(items, LineList) or not items:
        raise RegistryError(
            f"{key_at(path, mapping, 'patches')}: 'patches' must be a non-empty "
            f"list of {{target, edits}} mappings, got {short(items)}"
        )
    patches = []
    seen: dict[str, int] = {}
    for item in items:
        entry = expect_mapping(
            item,
            path,
            line=items.line,
            what="patch",
            required=_PATCH_REQUIRED,
            optional=_PATCH_OPTIONAL,
        )
        target = required_str(entry, "target", path)
        if not DOTTED.fullmatch(target) or "." not in target:
            raise RegistryError(
                f"{key_at(path, entry, 'target')}: 'target' must be a dotted path "
                f"module[.Class].function, got {short(target)}"
            )
        if target.split(".", 1)[0] == "__main__":
            raise RegistryError(
                f"{key_at(path, entry, 'target')}: 'target' {target} names __main__, whatever "
                "script happens to run; a revert lands when a target's module is imported, "
                "and a script's own code runs before that could happen; name a module the "
                "program imports"
            )
        if target in seen:
            raise RegistryError(
                f"{key_at(path, entry, 'target')}: target {target} is already "
                f"patched at line {seen[target]}; put all its edits in one entry"
            )
        seen[target] = entry.line
        preamble = _text(entry, "preamble", path)
        patches.append(
            Patch(target=target, edits=_edits(entry, path), line=entry.line, preamble=preamble)
        )
    return tuple(patches)


def one_edit_kind(texts: Mapping[EditKind, str], *, where: str) -> tuple[EditKind, str]:
    """sglang's rule: at most one kind has non-blank text; none (or only empty ones) deletes."""
    active = [kind for kind, text in texts.items() if text.strip()]
    if len(active) > 1:
        raise RegistryError(
            f"{where}: edit sets more than one of replacement, prepend, append "
            f"(got {', '.join(active)}); use one per edit"
        )
    if active:
        return active[0], texts[active[0]]
    return "replacement", ""


def expect_mapping(
    value: object,
    path: Path,
    *,
    line: int,
    what: str,
    required: Sequence[str],
    optional: Sequence[str],
) -> LineDict:
    """`value` as a mapping with every `required` key and no key outside `optional`."""
    if not isinstance(value, LineDict):
        raise RegistryError(
            f"{path}:{line}: {what} must be a mapping with keys "
            f"{', '.join(required)}; got {kind_of(value)} {short(value)}"
        )
    allowed = (*required, *optional)
    for key in value:
        if key not in allowed:
            raise RegistryError(
                f"{path}:{value.key_lines[key]}: unknown key {short(key)} in {what}; "
                f"expected one of: {', '.join(allowed)}"
            )
    for key in required:
        if key not in value:
            raise RegistryError(
                f"{path}:{value.line}: {what} is missing required key {key!r}; "
                f"required keys: {', '.join(required)}"
            )
    return value


def required_str(mapping: LineDict, key: str, path: Path) -> str:
    """`mapping[key]`, a non-blank string."""
    value = mapping[key]
    if not isinstance(value, str) or not value.strip():
        raise RegistryError(
            f"{key_at(path, mapping, key)}: {key!r} must be a non-empty string, "
            f"got {kind_of(value)} {short(value)}"
        )
    return value


def key_at(path: Path, mapping: LineDict, key: str) -> str:
    """`path:line` of `key` in `mapping` (the mapping's own line when the key is absent)."""
    return f"{path}:{mapping.key_lines.get(key, mapping.line)}"


def kind_of(value: object) -> str:
    """How an error names a YAML value's type: list, mapping, str, int, ..."""
    if isinstance(value, list | dict):
        return "list" if isinstance(value, list) else "mapping"
    return type(value).__name__


def _edits(entry: LineDict, path: Path) -> tuple[Edit, ...]:
    items = entry["edits"]
    if not isinstance(items, LineList) or not items:
        raise RegistryError(
            f"{key_at(path, entry, 'edits')}: 'edits' must be a non-empty list of "
            f"{{match, replacement|prepend|append}} mappings, got {short(items)}"
        )
    edits = []
    for item in items:
        raw = expect_mapping(
            item, path, line=items.line, what="edit", required=("match",), optional=EDIT_KINDS
        )
        match = required_str(raw, "match", path)
        kind, text = _edit_kind(raw, path)
        edits.append(Edit(match=match, kind=kind, text=text, line=raw.line))
    return tuple(edits)


def _edit_kind(raw: LineDict, path: Path) -> tuple[EditKind, str]:
    texts: dict[EditKind, str] = {}
    for kind in EDIT_KINDS:
        if kind in raw:
            texts[kind] = _text(raw, kind, path)
    return one_edit_kind(texts, where=f"{path}:{raw.line}")


def _text(mapping: LineDict, key: str, path: Path) -> str:
    """An optional text key: absent or empty (`key:`) gives ""."""
    value = mapping.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RegistryError(
            f"{key_at(path, mapping, key)}: {key!r} must be a string, "
            f"got {kind_of(value)} {short(value)}"
        )
    return value

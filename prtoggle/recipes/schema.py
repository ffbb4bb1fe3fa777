"""One recipe file: read within limits, parsed with the safe YAML loader, validated to a Recipe."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from prtoggle.errors import RegistryError
from prtoggle.patching.types import EDIT_KINDS, Edit, EditKind, Patch
from prtoggle.recipes.versions import APPLIES_TO_EXAMPLE, VersionRange, parse_version_range

MAX_RECIPE_BYTES = 1024 * 1024
"""A recipe file larger than this (1 MiB) is refused before it is parsed."""
MIN_PR, MAX_PR = 1, 10_000_000
"""The PR numbers a recipe may carry (inclusive)."""
SYMPTOMS = (
    "nan",
    "illegal-memory-access",
    "out-of-bounds",
    "memory-corruption",
    "stale-read",
    "wrong-output",
)
_FIX_REQUIRED = ("patches",)
_FIX_OPTIONAL = (
    "pr",
    "title",
    "url",
    "merged",
    "component",
    "symptom",
    "expect",
    "repro",
    "bench",
    "verified_on",
    "applies_to",
)
_PATCH_REQUIRED = ("target", "edits")
_PATCH_OPTIONAL = ("preamble",)
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_MODULE_KEY_EXAMPLES = {
    "repro": "fixes.scenarios.trtllm_draft_decode_capture",
    "bench": "fixes.benchmarks.draft_decode_capture_cost",
    "component": "fixes.attention.trtllm_mha_backend",
}
_CAPTURE_NAME = re.compile(r"capture|^__init__$|^init_cuda_graph_state")


@dataclass(frozen=True)
class Recipe:
    """One registered bug fix of one collection, and the patches that revert it."""

    pr: int
    title: str
    patches: tuple[Patch, ...]
    path: Path
    collection: str
    url: str | None = None
    merged: datetime.date | None = None
    component: str | None = None
    symptom: str | None = None
    expect: str | None = None
    repro: str | None = None
    bench: str | None = None
    verified_on: tuple[str, ...] = ()
    applies_to: VersionRange | None = None

    @property
    def acts_at_capture(self) -> bool:
        """Whether a target runs at CUDA-graph capture or state init (revert before capture)."""
        return any(_CAPTURE_NAME.search(p.target.rsplit(".", 1)[-1]) for p in self.patches)

    @property
    def label(self) -> str:
        """`collection/PR`, how messages name one fix."""
        return f"{self.collection}/{self.pr}"


def load_recipe(path: Path, *, collection: str | None = None) -> Recipe:
    """Parse and validate one recipe file; `collection` defaults to its directory's name.

    Safe YAML loader only. Any file that cannot be read as a recipe (over
    MAX_RECIPE_BYTES, not UTF-8, nested too deeply, malformed) is a RegistryError
    whose one-line message names the file.
    """
    document = _parse(path, _read_text(path))
    return _fix_from_mapping(document, path, collection or path.parent.name)


def load_recipe_text(text: str, *, path: Path, collection: str) -> Recipe:
    """Parse and validate a recipe held as text (sglang's registered ones); `path` names it."""
    return _fix_from_mapping(_parse(path, text), path, collection)


def _read_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_RECIPE_BYTES:
            raise RegistryError(
                f"{path}: recipe file is {size} bytes, over the limit of {MAX_RECIPE_BYTES} "
                "bytes (1 MiB)"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read fix file: {exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RegistryError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); recipe files must be UTF-8"
        ) from exc


def _parse(path: Path, text: str) -> object:
    loader = _LineLoader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = exc.problem or exc.context or "invalid YAML"
        raise RegistryError(f"{path}:{line}: YAML syntax error: {problem}") from exc
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}:1: YAML error: {exc}") from exc
    except RecursionError as exc:
        raise RegistryError(
            f"{path}: nested too deeply for the YAML loader (RecursionError); a recipe is a "
            "mapping of at most a few levels"
        ) from exc
    finally:
        loader.dispose()


class _LineDict(dict[Any, Any]):
    """A YAML mapping that remembers its own line and the line of every key."""

    line: int
    key_lines: dict[Any, int]


class _LineList(list[Any]):
    """A YAML sequence that remembers its line."""

    line: int


class _LineLoader(yaml.SafeLoader):
    """Safe loader whose mappings and sequences carry 1-based line numbers."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> _LineDict:
    loader.flatten_mapping(node)
    result = _LineDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in result:
            raise RegistryError(f"{loader.name}:{line}: duplicate key {key!r}")
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> _LineList:
    result = _LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    return result


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_sequence)


def _fix_from_mapping(document: object, path: Path, collection: str) -> Recipe:
    mapping = _expect_mapping(
        document, path, line=1, what="fix file", required=_FIX_REQUIRED, optional=_FIX_OPTIONAL
    )
    fields = {
        key: _optional_str(mapping, key, path)
        for key in ("url", "component", "expect", "repro", "bench")
    }
    _check_formats(mapping, path, fields)
    title = _optional_str(mapping, "title", path)
    return Recipe(
        pr=_pr(mapping, path),
        title=title or "",
        patches=_patches(mapping, path),
        path=path,
        collection=collection,
        merged=_merged(mapping, path),
        symptom=_symptom(mapping, path),
        verified_on=_verified_on(mapping, path),
        applies_to=_applies_to(mapping, path),
        **fields,
    )


def _pr(mapping: _LineDict, path: Path) -> int:
    """`pr:` when given, else the number the file is named after (sglang's files have none)."""
    if "pr" not in mapping:
        if not path.stem.isdigit():
            raise RegistryError(
                f"{path}:1: fix file has no 'pr' key and its name is not <PR>.yaml; add "
                "`pr: <number>` or name the file after the PR number"
            )
        pr, where = int(path.stem), f"{path}:1: file name {path.name}"
    else:
        pr, where = mapping["pr"], f"{_at(path, mapping, 'pr')}: 'pr'"
        if not isinstance(pr, int) or isinstance(pr, bool):
            raise RegistryError(f"{where} must be a positive integer, got {pr!r}")
    if not MIN_PR <= pr <= MAX_PR:
        raise RegistryError(
            f"{where} gives PR number {pr}, outside the supported range {MIN_PR}..{MAX_PR}"
        )
    if "pr" in mapping and path.stem.isdigit() and int(path.stem) != pr:
        raise RegistryError(
            f"{where} is {pr} but the file is named {path.name}; name a recipe file after "
            "its PR or give it another name"
        )
    return pr


def _check_formats(mapping: _LineDict, path: Path, fields: Mapping[str, str | None]) -> None:
    expect = fields["expect"]
    if expect is not None:
        try:
            re.compile(expect)
        except re.error as exc:
            raise RegistryError(
                f"{_at(path, mapping, 'expect')}: 'expect' {expect!r} is not a "
                f"valid regular expression: {exc}"
            ) from exc
    for key, example in _MODULE_KEY_EXAMPLES.items():
        value = fields[key]
        if value is not None and not _DOTTED.fullmatch(value):
            raise RegistryError(
                f"{_at(path, mapping, key)}: {key!r} must be a dotted module "
                f"name like {example}, got {value!r}"
            )


def _patches(mapping: _LineDict, path: Path) -> tuple[Patch, ...]:
    items = mapping["patches"]
    if not isinstance(items, _LineList) or not items:
        raise RegistryError(
            f"{_at(path, mapping, 'patches')}: 'patches' must be a non-empty "
            f"list of {{target, edits}} mappings, got {_short(items)}"
        )
    patches = []
    seen: dict[str, int] = {}
    for item in items:
        entry = _expect_mapping(
            item,
            path,
            line=items.line,
            what="patch",
            required=_PATCH_REQUIRED,
            optional=_PATCH_OPTIONAL,
        )
        target = _required_str(entry, "target", path)
        if not _DOTTED.fullmatch(target) or "." not in target:
            raise RegistryError(
                f"{_at(path, entry, 'target')}: 'target' must be a dotted path "
                f"module[.Class].function, got {target!r}"
            )
        if target in seen:
            raise RegistryError(
                f"{_at(path, entry, 'target')}: target {target} is already "
                f"patched at line {seen[target]}; put all its edits in one entry"
            )
        seen[target] = entry.line
        preamble = _text(entry, "preamble", path)
        patches.append(
            Patch(target=target, edits=_edits(entry, path), line=entry.line, preamble=preamble)
        )
    return tuple(patches)


def _edits(entry: _LineDict, path: Path) -> tuple[Edit, ...]:
    items = entry["edits"]
    if not isinstance(items, _LineList) or not items:
        raise RegistryError(
            f"{_at(path, entry, 'edits')}: 'edits' must be a non-empty list of "
            f"{{match, replacement|prepend|append}} mappings, got {_short(items)}"
        )
    edits = []
    for item in items:
        raw = _expect_mapping(
            item, path, line=items.line, what="edit", required=("match",), optional=EDIT_KINDS
        )
        match = _required_str(raw, "match", path)
        kind, text = _edit_kind(raw, path)
        edits.append(Edit(match=match, kind=kind, text=text, line=raw.line))
    return tuple(edits)


def _edit_kind(raw: _LineDict, path: Path) -> tuple[EditKind, str]:
    """sglang's rule: at most one kind has non-blank text; none (or only empty ones) deletes."""
    texts: dict[EditKind, str] = {}
    for kind in EDIT_KINDS:
        if kind in raw:
            texts[kind] = _text(raw, kind, path)  # type: ignore[index]
    active = [kind for kind, text in texts.items() if text.strip()]
    if len(active) > 1:
        raise RegistryError(
            f"{path}:{raw.line}: edit sets more than one of replacement, "
            f"prepend, append (got {', '.join(active)}); use one per edit"
        )
    if active:
        return active[0], texts[active[0]]
    return "replacement", ""


def _text(mapping: _LineDict, key: str, path: Path) -> str:
    """An optional text key: absent or empty (`key:`) gives ""."""
    value = mapping.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RegistryError(
            f"{_at(path, mapping, key)}: {key!r} must be a string, "
            f"got {_kind(value)} {_short(value)}"
        )
    return value


def _expect_mapping(
    value: object,
    path: Path,
    *,
    line: int,
    what: str,
    required: Sequence[str],
    optional: Sequence[str],
) -> _LineDict:
    if not isinstance(value, _LineDict):
        raise RegistryError(
            f"{path}:{line}: {what} must be a mapping with keys "
            f"{', '.join(required)}; got {_kind(value)} {_short(value)}"
        )
    allowed = (*required, *optional)
    for key in value:
        if key not in allowed:
            raise RegistryError(
                f"{path}:{value.key_lines[key]}: unknown key {key!r} in {what}; "
                f"expected one of: {', '.join(allowed)}"
            )
    for key in required:
        if key not in value:
            raise RegistryError(
                f"{path}:{value.line}: {what} is missing required key {key!r}; "
                f"required keys: {', '.join(required)}"
            )
    return value


def _required_str(mapping: _LineDict, key: str, path: Path) -> str:
    value = mapping[key]
    if not isinstance(value, str) or not value.strip():
        raise RegistryError(
            f"{_at(path, mapping, key)}: {key!r} must be a non-empty string, "
            f"got {type(value).__name__} {value!r}"
        )
    return value


def _optional_str(mapping: _LineDict, key: str, path: Path) -> str | None:
    return _required_str(mapping, key, path) if key in mapping else None


def _merged(mapping: _LineDict, path: Path) -> datetime.date | None:
    if "merged" not in mapping:
        return None
    value = mapping["merged"]
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise RegistryError(
        f"{_at(path, mapping, 'merged')}: 'merged' must be a date YYYY-MM-DD, got {value!r}"
    )


def _verified_on(mapping: _LineDict, path: Path) -> tuple[str, ...]:
    """`verified_on`: the versions of the target package the recipe was checked against."""
    value = mapping.get("verified_on", [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RegistryError(
            f"{_at(path, mapping, 'verified_on')}: 'verified_on' must be a list of version "
            f"strings like ['0.5.23'], got {_short(value)}"
        )
    return tuple(value)


def _applies_to(mapping: _LineDict, path: Path) -> VersionRange | None:
    """`applies_to`: the distribution and versions the recipe is for; verified_on inside it."""
    if "applies_to" not in mapping:
        return None
    text, where = mapping["applies_to"], _at(path, mapping, "applies_to")
    if not isinstance(text, str):
        raise RegistryError(
            f"{where}: 'applies_to' must be a string like {APPLIES_TO_EXAMPLE!r}, got {text!r}"
        )
    try:
        found = parse_version_range(text)
    except ValueError as exc:
        raise RegistryError(f"{where}: 'applies_to' {text!r} {exc}") from exc
    outside = [v for v in mapping.get("verified_on", []) if not found.contains(v)]
    if outside:
        raise RegistryError(
            f"{_at(path, mapping, 'verified_on')}: 'verified_on' lists {', '.join(outside)}, "
            f"outside applies_to {found.text}; a recipe is verified only on versions it covers"
        )
    return found


def _symptom(mapping: _LineDict, path: Path) -> str | None:
    value = _optional_str(mapping, "symptom", path)
    if value is not None and value not in SYMPTOMS:
        raise RegistryError(
            f"{_at(path, mapping, 'symptom')}: 'symptom' {value!r} is not one "
            f"of: {', '.join(SYMPTOMS)}"
        )
    return value


def _at(path: Path, mapping: _LineDict, key: str) -> str:
    return f"{path}:{mapping.key_lines.get(key, mapping.line)}"


def _kind(value: object) -> str:
    return "list" if isinstance(value, list) else type(value).__name__


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
